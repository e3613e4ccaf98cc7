"""REHEARSAL ONLY: the fake NVML's scenario as a base file plus one fragment per stub process.

`fake-nvml.conf` (beside the fake library named by HMN_NVML_LIB) is rebuilt from
`fake-nvml.base.conf` and every `procs/*.conf` fragment whenever a fragment changes. The fake
reads its scenario at each process's first nvmlInit, so every later hmn/pynvml/nvidia-smi
stand-in run sees the processes as they are at that moment.
"""

import fcntl
import os


def _dir():
    lib = os.environ.get("HMN_NVML_LIB")
    return os.path.dirname(lib) if lib else None


def rebuild():
    d = _dir()
    if not d or not os.path.exists(os.path.join(d, "fake-nvml.base.conf")):
        return
    procs = os.path.join(d, "procs")
    os.makedirs(procs, exist_ok=True)
    with open(os.path.join(d, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        text = open(os.path.join(d, "fake-nvml.base.conf")).read()
        for name in sorted(os.listdir(procs)):
            if name.endswith(".conf"):
                text += "\n" + open(os.path.join(procs, name)).read()
        tmp = os.path.join(d, "fake-nvml.conf.tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(d, "fake-nvml.conf"))


def publish(name, text):
    """Sets fragment NAME (None removes it) and rebuilds the scenario."""
    d = _dir()
    if not d or not os.path.exists(os.path.join(d, "fake-nvml.base.conf")):
        return
    procs = os.path.join(d, "procs")
    os.makedirs(procs, exist_ok=True)
    path = os.path.join(procs, f"{name}.conf")
    if text is None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
    else:
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    rebuild()


def process(pid, used, accounting_max=None):
    s = f"[process]\ndevice = 0\nlist = compute\npid = {pid}\nused = {used}\n"
    if accounting_max is not None:
        s += f"accounting_max = {accounting_max}\n"
    return s
