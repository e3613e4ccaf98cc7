"""REHEARSAL STAND-IN for nvidia-ml-py's `pynvml`, never used on a GPU machine.

`bench/device/rehearsal/setup.sh` puts this directory first on PYTHONPATH only when
REHEARSAL=1. It calls the same C symbols as the real module, through ctypes, on the library
named by HMN_NVML_LIB (the test bed's fake NVML), so the comparer reads the figures the fake
was configured with by the same route hmn does. Only the functions bench/device uses exist.

The stub `torch` beside it publishes each stub process's simulated use in the fake's scenario
(`_rehearsal_conf.py`), so processes appear in the lists as real PyTorch processes do.
"""

import ctypes
import os

NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
NVML_FEATURE_DISABLED, NVML_FEATURE_ENABLED = 0, 1
NVML_VALUE_NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF
nvmlMemory_v2 = 0x02000028

__version__ = "rehearsal-stand-in"


class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(value)
        self.value = value

    def __str__(self):
        return f"NVML error {self.value} (rehearsal stand-in)"


_lib = None


def _check(ret):
    if ret != NVML_SUCCESS:
        raise NVMLError(ret)


def _fn(name):
    if _lib is None:
        raise NVMLError(1)
    return getattr(_lib, name)


def nvmlInit():
    global _lib
    path = os.environ.get("HMN_NVML_LIB") or "libnvidia-ml.so.1"
    _lib = ctypes.CDLL(path)
    _check(_lib.nvmlInit_v2())


def nvmlShutdown():
    _check(_fn("nvmlShutdown")())


def _string(name, *args, size=96):
    buf = ctypes.create_string_buffer(size)
    _check(_fn(name)(*args, buf, ctypes.c_uint(size)))
    return buf.value.decode()


def nvmlSystemGetDriverVersion():
    return _string("nvmlSystemGetDriverVersion")


def nvmlSystemGetNVMLVersion():
    return _string("nvmlSystemGetNVMLVersion")


def nvmlSystemGetCudaDriverVersion_v2():
    v = ctypes.c_int()
    _check(_fn("nvmlSystemGetCudaDriverVersion_v2")(ctypes.byref(v)))
    return v.value


nvmlSystemGetCudaDriverVersion = nvmlSystemGetCudaDriverVersion_v2


def nvmlDeviceGetCount():
    n = ctypes.c_uint()
    _check(_fn("nvmlDeviceGetCount_v2")(ctypes.byref(n)))
    return n.value


def nvmlDeviceGetHandleByIndex(i):
    h = ctypes.c_void_p()
    _check(_fn("nvmlDeviceGetHandleByIndex_v2")(ctypes.c_uint(i), ctypes.byref(h)))
    return h


def nvmlDeviceGetName(h):
    return _string("nvmlDeviceGetName", h)


def nvmlDeviceGetUUID(h):
    return _string("nvmlDeviceGetUUID", h)


class c_nvmlPciInfo_t(ctypes.Structure):
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint),
                ("bus", ctypes.c_uint), ("device", ctypes.c_uint),
                ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
                ("busId", ctypes.c_char * 32)]


def nvmlDeviceGetPciInfo(h):
    p = c_nvmlPciInfo_t()
    _check(_fn("nvmlDeviceGetPciInfo_v3")(h, ctypes.byref(p)))
    return p


class c_nvmlMemory_v2_t(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong),
                ("reserved", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class c_nvmlMemory_t(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


def nvmlDeviceGetMemoryInfo(h, version=None):
    if version == nvmlMemory_v2:
        m = c_nvmlMemory_v2_t(version=nvmlMemory_v2)
        _check(_fn("nvmlDeviceGetMemoryInfo_v2")(h, ctypes.byref(m)))
        return m
    m = c_nvmlMemory_t()
    _check(_fn("nvmlDeviceGetMemoryInfo")(h, ctypes.byref(m)))
    return m


class c_nvmlProcessInfo_t(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class _Proc:
    def __init__(self, c):
        self.pid = c.pid
        self.usedGpuMemory = None if c.usedGpuMemory == NVML_VALUE_NOT_AVAILABLE else c.usedGpuMemory
        self.gpuInstanceId = c.gpuInstanceId
        self.computeInstanceId = c.computeInstanceId


def _processes(name, h):
    n = ctypes.c_uint(0)
    ret = _fn(name)(h, ctypes.byref(n), None)
    if ret == NVML_SUCCESS:
        return []
    if ret != NVML_ERROR_INSUFFICIENT_SIZE:
        raise NVMLError(ret)
    n = ctypes.c_uint(n.value + 4)
    arr = (c_nvmlProcessInfo_t * n.value)()
    _check(_fn(name)(h, ctypes.byref(n), arr))
    return [_Proc(arr[i]) for i in range(n.value)]


def nvmlDeviceGetComputeRunningProcesses(h):
    return _processes("nvmlDeviceGetComputeRunningProcesses_v3", h)


def nvmlDeviceGetGraphicsRunningProcesses(h):
    return _processes("nvmlDeviceGetGraphicsRunningProcesses_v3", h)


def _uint(name, h, *args):
    v = ctypes.c_uint()
    _check(_fn(name)(h, *[ctypes.c_uint(a) for a in args], ctypes.byref(v)))
    return v.value


def nvmlDeviceGetTemperature(h, sensor):
    return _uint("nvmlDeviceGetTemperature", h, sensor)


def nvmlDeviceGetPowerUsage(h):
    return _uint("nvmlDeviceGetPowerUsage", h)


def nvmlDeviceGetClockInfo(h, clock):
    return _uint("nvmlDeviceGetClockInfo", h, clock)


def nvmlDeviceGetMaxClockInfo(h, clock):
    return _uint("nvmlDeviceGetMaxClockInfo", h, clock)


def nvmlDeviceGetAccountingMode(h):
    return _uint("nvmlDeviceGetAccountingMode", h)


def nvmlDeviceGetPersistenceMode(h):
    return _uint("nvmlDeviceGetPersistenceMode", h)


def nvmlDeviceGetTotalEnergyConsumption(h):
    v = ctypes.c_ulonglong()
    _check(_fn("nvmlDeviceGetTotalEnergyConsumption")(h, ctypes.byref(v)))
    return v.value


class c_nvmlUtilization_t(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


def nvmlDeviceGetUtilizationRates(h):
    u = c_nvmlUtilization_t()
    _check(_fn("nvmlDeviceGetUtilizationRates")(h, ctypes.byref(u)))
    return u


def nvmlDeviceGetMigMode(h):
    cur, pend = ctypes.c_uint(), ctypes.c_uint()
    _check(_fn("nvmlDeviceGetMigMode")(h, ctypes.byref(cur), ctypes.byref(pend)))
    return [cur.value, pend.value]


class c_nvmlAccountingStats_t(ctypes.Structure):
    _fields_ = [("gpuUtilization", ctypes.c_uint), ("memoryUtilization", ctypes.c_uint),
                ("maxMemoryUsage", ctypes.c_ulonglong), ("time", ctypes.c_ulonglong),
                ("startTime", ctypes.c_ulonglong), ("isRunning", ctypes.c_uint),
                ("reserved", ctypes.c_uint * 5)]


def nvmlDeviceGetAccountingStats(h, pid):
    s = c_nvmlAccountingStats_t()
    _check(_fn("nvmlDeviceGetAccountingStats")(h, ctypes.c_uint(pid), ctypes.byref(s)))
    return s


def nvmlDeviceGetComputeMode(h):
    return _uint("nvmlDeviceGetComputeMode", h)


def nvmlDeviceGetMPSComputeRunningProcesses(h):
    return _processes("nvmlDeviceGetMPSComputeRunningProcesses_v3", h)


NVML_ERROR_TIMEOUT = 10
nvmlEventTypeXidCriticalError = 0x8


class c_nvmlEventData_t(ctypes.Structure):
    _fields_ = [("device", ctypes.c_void_p), ("eventType", ctypes.c_ulonglong),
                ("eventData", ctypes.c_ulonglong), ("gpuInstanceId", ctypes.c_uint),
                ("computeInstanceId", ctypes.c_uint)]


def nvmlEventSetCreate():
    s = ctypes.c_void_p()
    _check(_fn("nvmlEventSetCreate")(ctypes.byref(s)))
    return s


def nvmlDeviceGetSupportedEventTypes(h):
    v = ctypes.c_ulonglong()
    _check(_fn("nvmlDeviceGetSupportedEventTypes")(h, ctypes.byref(v)))
    return v.value


def nvmlDeviceRegisterEvents(h, types, s):
    _check(_fn("nvmlDeviceRegisterEvents")(h, ctypes.c_ulonglong(types), s))


def nvmlEventSetWait_v2(s, ms):
    e = c_nvmlEventData_t()
    _check(_fn("nvmlEventSetWait_v2")(s, ctypes.byref(e), ctypes.c_uint(ms)))
    return e


def nvmlEventSetFree(s):
    _check(_fn("nvmlEventSetFree")(s))
