"""xejit's exceptions, all in this one module (a leaf: it imports nothing of xejit).

Every error xejit raises on purpose is an :class:`XejitError`. Those caused by a wrong argument
or value are also the built-in exception a Python caller would catch for that mistake:
:class:`XejitTypeError` is a ``TypeError`` (an argument of the wrong type: a float grid size, a
list where an array is expected), :class:`XejitValueError` a ``ValueError`` (a value or shape that
cannot be used: a negative grid size, a read-only output, an unknown target);
:class:`OutOfBoundsError` an ``IndexError`` (``XEJIT_DEBUG=1``: a gather or scatter outside its
array). A kernel that does
not compile raises :class:`CompilationError` with the kernel's file, line and a caret; "internal
compiler error" in its message marks a bug of xejit, not of the kernel. Errors of one API live
beside it and derive from these (``ParseError``, ``MatmulError``, ``AttentionError``,
``ToolchainMissingError``).

Example:
    >>> e = CompilationError("undefined name 'x'", file="k.py", line=3, col=8,
    ...                      source_line="    y = x + 1")
    >>> print(e)
    k.py:3:8: error: undefined name 'x'
        y = x + 1
            ^
"""
from __future__ import annotations

import linecache
from typing import Any

__all__ = ["XejitError", "XejitTypeError", "XejitValueError", "CompilationError", "CompilerError",
           "VerifyError", "InterpreterError", "ToolError", "SpirvValidationError", "DeviceError",
           "BuildError", "LaunchError", "ArgumentError", "ArgumentValueError"]


class XejitError(Exception):
    """Base of every error xejit raises on purpose (frontend, compiler, tools, devices, launches)."""


class XejitTypeError(XejitError, TypeError):
    """A value of the wrong type was passed to xejit (also a ``TypeError``)."""


class XejitValueError(XejitError, ValueError):
    """A value or shape xejit cannot use (also a ``ValueError``)."""


class OutOfBoundsError(XejitError, IndexError):
    """``XEJIT_DEBUG=1``: a ``load_gather`` / ``store_scatter`` lane used an offset outside its
    array (also an ``IndexError``). The message names the kernel, its source line, the access and
    the offset. Without debug mode such a lane reads the padding / is not written."""


class CompilationError(XejitError):
    """A kernel does not compile. The message quotes file:line:col, the source line and a caret."""

    def __init__(self, message: str, *, file: str = "<unknown>", line: int = 0, col: int = 0,
                 source_line: str | None = None):
        self.message = message
        self.file, self.line, self.col = file, line, col
        self.source_line = source_line
        super().__init__(self._format())

    def _format(self) -> str:
        text = f"{self.file}:{self.line}:{self.col}: error: {self.message}"
        if self.source_line is not None:
            text += f"\n{self.source_line.rstrip()}\n{' ' * self.col}^"
        return text


class CompilerError(CompilationError):
    """An op or case the compiler does not support (or a contradiction it found), reported like
    the frontend's errors: ``file:line:col: error: <op>: message``, the kernel's source line and
    a caret under the column (when the op has a location)."""

    def __init__(self, message: str, op: Any = None):
        self.op = op
        loc = op.loc if op is not None else None
        if loc is None or not loc.line:
            what = f"{op.name}: " if op is not None else ""
            self.message, self.file, self.line, self.col, self.source_line = what + message, "", 0, 0, None
            Exception.__init__(self, self.message)
            return
        src = linecache.getline(loc.file, loc.line).rstrip("\n") or None
        super().__init__(f"{op.name}: {message}", file=loc.file, line=loc.line, col=loc.col, source_line=src)


class VerifyError(XejitError, ValueError):
    """An IR op breaks a rule of its definition. ``op`` is the offending op (has ``.loc``)."""

    def __init__(self, message: str, op: Any = None):
        super().__init__(message)
        self.op = op


class InterpreterError(XejitError, RuntimeError):
    """A failure while interpreting an op; the message names the op and its source line."""


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
