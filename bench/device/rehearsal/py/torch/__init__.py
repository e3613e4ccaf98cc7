"""REHEARSAL STAND-IN for PyTorch, never used on a GPU machine: allocates nothing.

Put first on PYTHONPATH by `bench/device/rehearsal/setup.sh` only when REHEARSAL=1. It imitates
the CUDA caching allocator's bookkeeping (allocated in 512-byte units, reserved in 2 MiB blocks
— one pool, where PyTorch has a small and a large one — their peaks,
`empty_cache`) and a CUDA context of REHEARSAL_CUDA_CONTEXT_BYTES (default 500 MiB) created by
the first CUDA tensor, and publishes the process's use (context + reserved) in the fake NVML's
scenario, so hmn, the pynvml stand-in and the nvidia-smi stand-in list it as a PyTorch process.
Only what bench/device's scripts call exists.
"""

import atexit
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _rehearsal_conf  # noqa: E402

__version__ = "0.0-rehearsal-stub"


class _Version:
    cuda = "0.0-rehearsal"


version = _Version()


class dtype:
    def __init__(self, name, size):
        self.name, self.itemsize = name, size

    def __repr__(self):
        return f"torch.{self.name}"


uint8 = dtype("uint8", 1)
int64 = long = dtype("int64", 8)
float32 = float = dtype("float32", 4)
bfloat16 = dtype("bfloat16", 2)
float16 = half = dtype("float16", 2)
_default_dtype = [float32]
_default_device = ["cpu"]


def set_default_dtype(d):
    _default_dtype[0] = d


def get_default_dtype():
    return _default_dtype[0]


BLOCK = 2 << 20
_CTX = int(os.environ.get("REHEARSAL_CUDA_CONTEXT_BYTES", str(500 << 20)))


class _Allocator:
    def __init__(self):
        self.context = False
        self.allocated = self.reserved = self.max_reserved = self.max_allocated = 0

    def publish(self):
        _rehearsal_conf.publish(
            f"torch-{os.getpid()}",
            _rehearsal_conf.process(os.getpid(), _CTX + self.reserved) if self.context else None,
        )

    def alloc(self, n):
        """Rounded to 512 bytes as PyTorch does; reserved grows in whole 2 MiB blocks."""
        n = -(-n // 512) * 512
        self.context = True
        self.allocated += n
        self.max_allocated = max(self.max_allocated, self.allocated)
        if self.allocated > self.reserved:
            self.reserved = -(-self.allocated // BLOCK) * BLOCK
            self.max_reserved = max(self.max_reserved, self.reserved)
            self.publish()
        return n

    def free(self, n):
        self.allocated -= n


_alloc = _Allocator()


def _leave(*_):
    _rehearsal_conf.publish(f"torch-{os.getpid()}", None)


atexit.register(_leave)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))


class device:
    def __init__(self, name="cpu"):
        self.type = str(name).split(":")[0]

    def __enter__(self):
        self._prev = _default_device[0]
        _default_device[0] = self.type
        return self

    def __exit__(self, *a):
        _default_device[0] = self._prev


def _dev(d):
    if d is None:
        return _default_device[0]
    return d.type if isinstance(d, device) else str(d).split(":")[0]


class Tensor:
    def __init__(self, shape, dtype=None, device=None):
        self.shape = tuple(shape)
        self.dtype = dtype or _default_dtype[0]
        self.device = _dev(device)
        n = 1
        for s in self.shape:
            n *= s
        self.nbytes = n * self.dtype.itemsize
        self._held = _alloc.alloc(self.nbytes) if self.device == "cuda" else 0

    def __del__(self):
        if self._held:
            _alloc.free(self._held)
            self._held = 0

    def fill_(self, _v):
        return self

    def __matmul__(self, other):
        return Tensor(self.shape, self.dtype, self.device)

    def to(self, dev=None, dtype=None, **_):
        return Tensor(self.shape, dtype or self.dtype, dev or self.device)

    def cuda(self):
        return self.to("cuda")


def _shape(size):
    return size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size


def empty(*size, dtype=None, device=None):
    return Tensor(_shape(size), dtype, device)


def ones(*size, dtype=None, device=None):
    return Tensor(_shape(size), dtype, device)


zeros = ones


def randn(*size, dtype=None, device=None):
    return Tensor(_shape(size), dtype, device)


def randint(low, high, size, dtype=None, device=None):
    return Tensor(size, dtype or int64, device)


class no_grad:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


inference_mode = no_grad


class _Cuda:
    _alloc = _alloc

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def init():
        _alloc.context = True
        _alloc.publish()

    @staticmethod
    def synchronize():
        # A real sync waits for the GPU with the CPU idle; without this the `busy` load's
        # matmul loop spun a whole core for its life and starved the tests running beside it.
        time.sleep(0.05)

    @staticmethod
    def current_device():
        return 0

    @staticmethod
    def get_device_name(_i=0):
        return "rehearsal stub device"

    @staticmethod
    def memory_reserved():
        return _alloc.reserved

    @staticmethod
    def memory_allocated():
        return _alloc.allocated

    @staticmethod
    def max_memory_reserved():
        return _alloc.max_reserved

    @staticmethod
    def max_memory_allocated():
        return _alloc.max_allocated

    @staticmethod
    def reset_peak_memory_stats():
        _alloc.max_reserved, _alloc.max_allocated = _alloc.reserved, _alloc.allocated

    @staticmethod
    def empty_cache():
        r = -(-_alloc.allocated // BLOCK) * BLOCK
        if _alloc.reserved != r:
            _alloc.reserved = r
            _alloc.publish()


cuda = _Cuda()
sys.modules["torch.cuda"] = cuda  # type: ignore[assignment]
