"""xejit's user-facing exceptions: the base of all of them, and the one for kernels that do not compile.

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
