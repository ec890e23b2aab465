"""Errors raised below the frontend: code generation, SPIR-V tools, devices and launches.

All derive from :class:`XejitError` so that a user can catch every xejit failure at once.
"""
from __future__ import annotations

from ..errors import XejitError, XejitTypeError, XejitValueError  # shared with the frontend's CompilationError

__all__ = ["XejitError", "ToolError", "SpirvValidationError", "DeviceError", "BuildError", "LaunchError",
           "ArgumentError", "ArgumentValueError"]


class ToolError(XejitError):
    """An external tool (spirv-val, spirv-dis, the driver's program build) failed.

    The message carries the command to rerun the failing step by hand.
    """


class SpirvValidationError(ToolError):
    """spirv-val rejected a module; the message names the failing instruction."""


class DeviceError(XejitError):
    """No usable device, or a device that lacks what a kernel needs."""


class BuildError(ToolError):
    """The driver could not build a program from SPIR-V."""


class LaunchError(XejitError):
    """A kernel launch was rejected: bad grid, bad arguments, or a failed submission."""


class ArgumentError(LaunchError, XejitTypeError):
    """An argument does not match the kernel's signature (count, type, layout); a ``TypeError``."""


class ArgumentValueError(LaunchError, XejitValueError):
    """An argument or grid of the right type with a value that cannot be used (a negative grid
    size, a read-only array the kernel writes); a ``ValueError``."""
