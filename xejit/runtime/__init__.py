"""The runtime layer: devices, program builds, the compile cache and kernel launch (through dpctl)."""
from . import _icd  # noqa: F401  (first: makes the CPU OpenCL runtime visible to dpctl)
from .cache import Cache, default_cache, key_of
from .device import Device, default_device, detect_target, devices, get_device
from .launch import ARG_KINDS, Kernel
from .program import Program, build_program

__all__ = ["Cache", "default_cache", "key_of", "Device", "default_device", "detect_target", "devices",
           "get_device", "ARG_KINDS", "Kernel", "Program", "build_program"]
