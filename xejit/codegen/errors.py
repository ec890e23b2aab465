"""Errors raised below the frontend: code generation, SPIR-V tools, devices and launches.

All derive from :class:`XejitError` so that a user can catch every xejit failure at once.
"""
from __future__ import annotations

from ..errors import XejitError  # the one base class, shared with the frontend's CompilationError

__all__ = ["XejitError", "ToolError", "SpirvValidationError", "DeviceError", "BuildError", "LaunchError",
           "ArgumentError"]


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


class ArgumentError(LaunchError, TypeError):
    """An argument does not match the kernel's signature (count, type, layout)."""
