"""xejit's user-facing exceptions: the base of all of them, and the one for kernels that do not compile.

Every error xejit raises on purpose is an :class:`XejitError`. Those caused by a wrong argument
or value are also the built-in exception a Python caller would catch for that mistake:
:class:`XejitTypeError` is a ``TypeError`` (an argument of the wrong type: a float grid size, a
list where an array is expected), :class:`XejitValueError` a ``ValueError`` (a value or shape that
cannot be used: a negative grid size, a read-only output, an unknown target);
:class:`OutOfBoundsError` an ``IndexError`` (``XEJIT_DEBUG=1``: a gather or scatter outside its
array). A kernel that does
not compile raises :class:`CompilationError` with the kernel's file, line and a caret; "internal
compiler error" in its message marks a bug of xejit, not of the kernel.

Example:
    >>> e = CompilationError("undefined name 'x'", file="k.py", line=3, col=8,
    ...                      source_line="    y = x + 1")
    >>> print(e)
    k.py:3:8: error: undefined name 'x'
        y = x + 1
            ^
"""
from __future__ import annotations


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
