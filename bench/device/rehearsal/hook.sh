# REHEARSAL ONLY — called by bench/device/run-all.sh when REHEARSAL=1, never on a GPU machine.
#
#   bash hook.sh before-run-peak X_BYTES Y_BYTES   # step 2: declare hmn run's command's row
#   bash hook.sh after-run-peak RESULT_JSON        # the accounting record of its pid
#
# hmn run's NVML reads the fake's scenario once, before its command exists, so the command's
# row is declared in advance (`pid = child_of_caller`) with the peak the stub torch will report
# (max(X, Y) in 2 MiB blocks, one more block for its 1-element tensor, + the stub's CUDA
# context). Circular by design: it exercises the
# flow and the comparer, it does not test hmn. After the run, the record a driver in accounting
# mode keeps for the finished pid is left for the nvidia-smi stand-in's --query-accounted-apps.
case $1 in
  before-run-peak)
    python3 - "$2" "$3" <<'PY'
import os, sys, _rehearsal_conf as c
block = 2 << 20
peak = -(-max(int(sys.argv[1]), int(sys.argv[2])) // block) * block + block
peak += int(os.environ.get("REHEARSAL_CUDA_CONTEXT_BYTES", str(500 << 20)))
# from_tick: listed from the 20th list call (~2 s in), once hmn's guard has surely started the
# command; listed earlier, the fake would tie its record to the guard's pid (it resolves
# child_of_caller to the guard until the guard has a child) and the record would match nothing.
c.publish("run-peak", "[process]\ndevice = 0\nlist = compute\npid = child_of_caller\n"
          f"used = {peak}\naccounting_max = {peak}\nfrom_tick = 20\n")
PY
    ;;
  after-run-peak)
    python3 - "$2" <<'PY'
import json, os, re, sys, _rehearsal_conf as c
d = os.path.dirname(os.environ["HMN_NVML_LIB"])
conf = open(os.path.join(d, "fake-nvml.conf")).read()
peak = re.search(r"pid = child_of_caller\nused = (\d+)", conf)
on = re.search(r"(?m)^accounting_mode = 1$", conf)
c.publish("run-peak", None)
try:
    pid = json.load(open(sys.argv[1]))["pid"]
except (OSError, ValueError, KeyError):
    sys.exit(0)
if peak and on:
    with open(os.path.join(d, "accounted.csv"), "a") as f:
        f.write(f"{pid},{int(peak[1]) >> 20}\n")
PY
    ;;
  *) echo "hook.sh: unknown hook $1" >&2; exit 2 ;;
esac
