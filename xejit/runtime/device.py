"""Devices through dpctl: discovery, the default device, and the compile target each maps to.

Example:
    >>> dev = default_device()
    >>> dev.target in ("pvc", "bmg", "lnl", "ptl", "dg2", "generic")
    True
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from . import _icd  # noqa: F401  (sets OCL_ICD_FILENAMES before dpctl is imported)
from . import cpu_threads
from .. import options
from ..errors import DeviceError

# Device-name patterns of the Intel GPU families xejit has targets for, most specific first.
# Sources: the marketing names Level Zero reports (Intel ark, intel-xpu-backend-for-triton's
# device tables). PCI device ids would be more exact but dpctl does not expose them.
_NAME_TO_TARGET = (
    (re.compile(r"Data Center GPU Max|Ponte Vecchio|\bPVC\b", re.I), "pvc"),
    (re.compile(r"Arc\(TM\) B3\d0|Panther Lake|\bPTL\b", re.I), "ptl"),
    (re.compile(r"Arc\(TM\) B\d{3}|Battlemage|\bBMG\b", re.I), "bmg"),
    (re.compile(r"Arc\(TM\) 1[34]0V|Lunar Lake|\bLNL\b", re.I), "lnl"),
    (re.compile(r"Arc\(TM\) A\d{3}|Data Center GPU Flex|\bDG2\b|Alchemist", re.I), "dg2"),
)


def detect_target(name: str, is_gpu: bool) -> str:
    """The xejit target for a device of this name; ``generic`` for anything else (e.g. CPUs)."""
    if is_gpu:
        for pattern, target in _NAME_TO_TARGET:
            if pattern.search(name):
                return target
    return "generic"


@dataclass(frozen=True, eq=False)
class Device:
    """A SYCL device, its queue, and the xejit target its code is compiled for."""

    sycl_device: object
    queue: object = field(repr=False)
    target: str
    #: the device reads and writes plain host memory (the ``usm_system_allocations`` aspect):
    #: kernels compiled for it take arrays as addresses, and host arrays are passed without a copy
    system_memory: bool = False

    @property
    def name(self) -> str:
        return self.sycl_device.name

    @property
    def filter_string(self) -> str:
        return self.sycl_device.filter_string

    @property
    def backend(self) -> str:
        return str(self.sycl_device.backend).split(".")[-1]

    @property
    def kind(self) -> str:
        return str(self.sycl_device.device_type).split(".")[-1]

    @property
    def sub_group_sizes(self) -> list[int]:
        return list(self.sycl_device.sub_group_sizes)

    def __repr__(self) -> str:
        return f"Device({self.filter_string!r}, {self.name!r}, target={self.target!r})"


def _wrap(sycl_device) -> Device:
    import dpctl

    try:
        queue = dpctl.SyclQueue(sycl_device)
    except Exception as e:  # dpctl raises its own types; the user sees one xejit error
        raise DeviceError(f"cannot create a queue on {sycl_device.name}: {e}") from None
    if sycl_device.is_cpu:   # its runtime pins its worker threads; launches give them the mask back
        cpu_threads.watch()
    return Device(sycl_device, queue, detect_target(sycl_device.name, sycl_device.is_gpu),
                  _system_memory(sycl_device))


def _system_memory(sycl_device) -> bool:
    """Whether the device's kernels reach plain host memory (SYCL's ``usm_system_allocations``)."""
    return bool(getattr(sycl_device, "has_aspect_usm_system_allocations", False))


def devices() -> list[Device]:
    """Every device dpctl sees (Level Zero GPUs, OpenCL CPUs, ...)."""
    import dpctl

    with cpu_threads.opening():
        return [_wrap(d) for d in dpctl.get_devices()]


def _rank(d) -> tuple[int, int]:
    # A Level Zero GPU first, then any GPU, then the CPU.
    backend = str(d.backend)
    return (0 if d.is_gpu and "level_zero" in backend else 1 if d.is_gpu else 2, 0)


def get_device(filter_string: str | None = None) -> Device:
    """The device for a dpctl filter string (``"opencl:cpu"``, ``"level_zero:gpu:0"``, ...).

    Without one: ``XEJIT_DEVICE`` if set, else a Level Zero GPU, else the OpenCL CPU device.
    One :class:`Device` (and queue) per filter string per process.
    """
    return _get_device(filter_string or options.current().device)


@functools.lru_cache(maxsize=None)
def _get_device(filter_string: str | None) -> Device:
    with cpu_threads.opening():   # the CPU runtime starts its worker threads here
        return _open_device(filter_string)


def _open_device(filter_string: str | None) -> Device:
    import dpctl

    if filter_string:
        try:
            return _wrap(dpctl.SyclDevice(filter_string))
        except DeviceError:
            raise
        except Exception:
            seen = ", ".join(d.filter_string for d in dpctl.get_devices()) or "none"
            raise DeviceError(
                f"no device matches the filter {filter_string!r} (XEJIT_DEVICE or device=); "
                f"devices seen: {seen}") from None
    found = sorted(dpctl.get_devices(), key=_rank)
    if not found:
        raise DeviceError(
            "no SYCL device found: neither a Level Zero GPU nor the OpenCL CPU runtime "
            f"(expected at {_icd.CPU_RUNTIME}; is the 'intel-opencl-rt' package installed, and was "
            "xejit imported before dpctl?)")
    return _wrap(found[0])


#: (the raw launch variables, the default device they chose): XEJIT_DEVICE is one of them, and
#: reading four is cheaper than parsing every option (this runs for every USM result)
_default: tuple = ((), None)


def default_device() -> Device:
    """The device kernels run on unless told otherwise (see :func:`get_device`)."""
    global _default
    key = options.raw_launch()
    if _default[0] != key or _default[1] is None:
        _default = (key, get_device(None))
    return _default[1]


_by_context: dict = {}


def device_for_queue(queue) -> Device:
    """The :class:`Device` whose programs run on ``queue``: one per (device, context) per process,
    the default device for its own queue's; its ``queue`` (the first seen) builds the programs, and
    launches may go to any queue of that device and context (torch's stream queue, an array's)."""
    dev = default_device()
    if queue is dev.queue or (queue.sycl_device == dev.sycl_device and queue.sycl_context == dev.queue.sycl_context):
        return dev
    key = (queue.sycl_device.filter_string, queue.sycl_context)
    got = _by_context.get(key)
    if got is None:
        sd = queue.sycl_device
        got = _by_context[key] = Device(sd, queue, detect_target(sd.name, sd.is_gpu), _system_memory(sd))
    return got

