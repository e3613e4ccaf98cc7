"""`hmn top` on a real driver, for bench/device/ops_check.sh (issue 26, run 6). The lent machines
have no tmux: this drives the real binary in a pseudo-terminal (ROWSxCOLS), keeps a minimal
screen of what it drew (cursor moves, erases and text; colours ignored), and measures it:

    ops_top.py HMN OUTDIR [SECONDS]

- CPU: the process's utime + stime (/proc/PID/stat) over SECONDS (default 10) of the plain
  view at --interval 1s, as % of one core; RSS and threads at the end of that window;
- screen-main.txt: the screen then; Enter opens the detail of the selected row (the largest
  VRAM first), and screen-detail.txt is the screen 2.5 s later (its unattributed, compute-mode
  and XID lines are what ops_compare.py reads);
- q, then the exit status (0 expected) within 5 s.

Writes OUTDIR/top.json. Terminal queries (cursor position) are answered as a terminal would.
"""

import json
import os
import pty
import re
import select
import signal
import struct
import sys
import time

ROWS, COLS = 50, 160
CSI = re.compile(rb"\x1b\[([0-9;?>=]*)([ -/]*)([@-~])")


class Screen:
    """Enough of a VT100 for what crossterm writes: CUP, erase, cursor moves, text."""

    def __init__(self, rows, cols):
        self.rows, self.cols = rows, cols
        self.cells = [[" "] * cols for _ in range(rows)]
        self.r = self.c = 0
        self.pending = b""
        self.replies = []

    def text(self):
        return "\n".join("".join(row).rstrip() for row in self.cells)

    def put(self, ch):
        if self.c >= self.cols:
            return
        if 0 <= self.r < self.rows:
            self.cells[self.r][self.c] = ch
        self.c += 1

    def erase(self, r, c0, c1):
        if 0 <= r < self.rows:
            for c in range(max(0, c0), min(self.cols, c1)):
                self.cells[r][c] = " "

    def csi(self, params, final):
        nums = [int(x) if x.isdigit() else 0 for x in params.lstrip("?>=").split(";")] if params else []
        a = nums[0] if nums else 0
        if final in "Hf":
            self.r = (nums[0] if nums and nums[0] else 1) - 1
            self.c = (nums[1] if len(nums) > 1 and nums[1] else 1) - 1
        elif final == "J":
            if a == 2 or a == 3:
                for r in range(self.rows):
                    self.erase(r, 0, self.cols)
            elif a == 0:
                self.erase(self.r, self.c, self.cols)
                for r in range(self.r + 1, self.rows):
                    self.erase(r, 0, self.cols)
        elif final == "K":
            if a == 0:
                self.erase(self.r, self.c, self.cols)
            elif a == 1:
                self.erase(self.r, 0, self.c + 1)
            else:
                self.erase(self.r, 0, self.cols)
        elif final == "A":
            self.r = max(0, self.r - max(a, 1))
        elif final == "B":
            self.r = min(self.rows - 1, self.r + max(a, 1))
        elif final == "C":
            self.c = min(self.cols - 1, self.c + max(a, 1))
        elif final == "D":
            self.c = max(0, self.c - max(a, 1))
        elif final == "G":
            self.c = max(a, 1) - 1
        elif final == "d":
            self.r = max(a, 1) - 1
        elif final == "n" and a == 6:
            self.replies.append(f"\x1b[{self.r + 1};{self.c + 1}R".encode())
        elif final == "c":
            self.replies.append(b"\x1b[?62;22c")

    def feed(self, data):
        buf = self.pending + data
        self.pending = b""
        i = 0
        while i < len(buf):
            b = buf[i]
            if b == 0x1B:
                if i + 1 >= len(buf):
                    self.pending = buf[i:]
                    return
                nxt = buf[i + 1]
                if nxt == ord("["):
                    m = CSI.match(buf, i)
                    if not m:
                        if len(buf) - i < 64:
                            self.pending = buf[i:]
                            return
                        i += 2
                        continue
                    self.csi(m.group(1).decode(), m.group(3).decode())
                    i = m.end()
                    continue
                if nxt == ord("]"):  # OSC, to BEL or ST
                    end = min([x for x in (buf.find(b"\x07", i), buf.find(b"\x1b\\", i)) if x >= 0] or [-1])
                    if end < 0:
                        self.pending = buf[i:]
                        return
                    i = end + (1 if buf[end] == 7 else 2)
                    continue
                i += 3 if nxt in b"()" else 2
                continue
            if b == 0x0D:
                self.c = 0
            elif b == 0x0A:
                self.r = min(self.rows - 1, self.r + 1)
            elif b == 0x08:
                self.c = max(0, self.c - 1)
            elif b >= 0x20:
                n = 1 if b < 0x80 else 2 if b >> 5 == 6 else 3 if b >> 4 == 14 else 4
                if i + n > len(buf):
                    self.pending = buf[i:]
                    return
                self.put(buf[i:i + n].decode("utf-8", "replace"))
                i += n
                continue
            i += 1


def ticks(pid):
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])
    except (OSError, IndexError, ValueError):
        return None


def status(pid):
    out = {}
    try:
        for line in open(f"/proc/{pid}/status"):
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "Threads"):
                out[k] = v.strip()
    except OSError:
        pass
    return out


def main(hmn, outdir, seconds=10.0):
    os.makedirs(outdir, exist_ok=True)
    pid, fd = pty.fork()
    if pid == 0:
        import fcntl
        import termios
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        os.environ["TERM"] = "xterm-256color"
        os.execv(hmn, [hmn, "top", "--interval", "1s", "--mono"])
    screen = Screen(ROWS, COLS)
    raw = bytearray()
    t0 = time.time()

    def pump(until):
        while time.time() < until:
            r, _, _ = select.select([fd], [], [], max(0.0, min(0.2, until - time.time())))
            if r:
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    return False
                if not data:
                    return False
                raw.extend(data)
                screen.feed(data)
                for reply in screen.replies:
                    os.write(fd, reply)
                screen.replies.clear()
        return True

    res = {"argv": [hmn, "top", "--interval", "1s", "--mono"], "rows": ROWS, "cols": COLS}
    alive = pump(t0 + 2.0)
    hz = os.sysconf("SC_CLK_TCK")
    a = ticks(pid)
    ta = time.time()
    alive = alive and pump(ta + seconds)
    b = ticks(pid)
    tb = time.time()
    res["status"] = status(pid)
    if a is not None and b is not None:
        res["cpu_ticks"] = b - a
        res["window_s"] = round(tb - ta, 3)
        res["cpu_percent_of_core"] = round(100.0 * (b - a) / hz / (tb - ta), 3)
    open(os.path.join(outdir, "screen-main.txt"), "w").write(screen.text())
    if alive:
        os.write(fd, b"\r")
        alive = pump(time.time() + 2.5)
    open(os.path.join(outdir, "screen-detail.txt"), "w").write(screen.text())
    if alive:
        os.write(fd, b"\x1b")
        pump(time.time() + 0.5)
        os.write(fd, b"q")
    exit_status = None
    end = time.time() + 5
    while time.time() < end:
        pump(time.time() + 0.1)
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            exit_status = os.waitstatus_to_exitcode(st)
            break
    if exit_status is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        exit_status = "killed: did not quit within 5 s of q"
    res["exit"] = exit_status
    res["bytes_written"] = len(raw)
    res["seconds"] = round(time.time() - t0, 2)
    open(os.path.join(outdir, "top.raw"), "wb").write(bytes(raw))
    json.dump(res, open(os.path.join(outdir, "top.json"), "w"), indent=1)
    print(json.dumps({k: res.get(k) for k in ("cpu_percent_of_core", "status", "exit", "bytes_written")}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 10.0)
