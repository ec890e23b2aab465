"""Every ``XEJIT_*`` environment variable, read and parsed in this one place.

:func:`current` returns an immutable :class:`Options`. It is parsed once per distinct set of
values: each call compares the raw strings with the last ones (a dict lookup per variable), so
a variable set while the program runs (``monkeypatch.setenv`` in a test, ``os.environ`` in a
notebook) is honoured at the next compile or launch, and nothing is parsed twice.

========================  ===============================================================
``XEJIT_INTERPRET``       run kernels in the numpy interpreter instead of a device
``XEJIT_EMULATE``         a GPU target (``pvc``, ``dg2``, ...) whose code path runs on the CPU device
``XEJIT_DEVICE``          a SYCL filter string choosing the device (``opencl:cpu:0``)
``XEJIT_DEBUG``           debug checks (see docs/language.md)
``XEJIT_STRICT``          a fallback from the fast instructions is an error, not a report line
``XEJIT_DUMP``            a directory that receives every compiler stage of every kernel
``XEJIT_DEVICE_BUILD``    build every Intel GPU module with Intel's compiler at compile time
``XEJIT_CACHE_DIR``       the compile cache (default ``~/.cache/xejit``)
``XEJIT_TOOLCHAIN_DIR``   where ``python -m xejit toolchain install`` puts Intel's compiler
``XEJIT_OCLOC``           an ``ocloc`` to use instead of the installed one
``XEJIT_PRINT_AUTOTUNING``  print the autotuner's choice
========================  ===============================================================

Flags are off when unset, empty, ``0``, ``false``, ``no`` or ``off`` (any case).

Example:
    >>> import os
    >>> os.environ["XEJIT_STRICT"] = "1"
    >>> current().strict
    True
    >>> del os.environ["XEJIT_STRICT"]
    >>> current().strict
    False
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Options", "current", "flag"]

_NAMES = ("XEJIT_INTERPRET", "XEJIT_EMULATE", "XEJIT_DEVICE", "XEJIT_DEBUG", "XEJIT_STRICT",
          "XEJIT_DUMP", "XEJIT_DEVICE_BUILD", "XEJIT_CACHE_DIR", "XEJIT_TOOLCHAIN_DIR", "XEJIT_OCLOC",
          "XEJIT_PRINT_AUTOTUNING")
_OFF = ("", "0", "false", "no", "off")


def flag(value: str | None) -> bool:
    """An environment flag's truth: off when unset, empty, 0, false, no or off."""
    return value is not None and value.strip().lower() not in _OFF


@dataclass(frozen=True)
class Options:
    """The parsed values (``None`` / ``False`` when unset)."""
    interpret: bool = False
    emulate: str | None = None
    device: str | None = None
    debug: bool = False
    strict: bool = False
    dump: str | None = None
    device_build: bool = False
    cache_dir: Path = Path.home() / ".cache" / "xejit"
    toolchain_dir: Path = Path.home() / ".cache" / "xejit-toolchain"
    ocloc: str | None = None
    print_autotuning: bool = False


def _parse(raw: tuple[str | None, ...]) -> Options:
    env = dict(zip(_NAMES, raw))
    defaults = Options()
    return Options(
        interpret=flag(env["XEJIT_INTERPRET"]),
        emulate=(env["XEJIT_EMULATE"] or "").strip().lower() or None,
        device=env["XEJIT_DEVICE"] or None,
        debug=flag(env["XEJIT_DEBUG"]),
        strict=flag(env["XEJIT_STRICT"]),
        dump=env["XEJIT_DUMP"] or None,
        device_build=flag(env["XEJIT_DEVICE_BUILD"]),
        cache_dir=Path(env["XEJIT_CACHE_DIR"]) if env["XEJIT_CACHE_DIR"] else defaults.cache_dir,
        toolchain_dir=Path(env["XEJIT_TOOLCHAIN_DIR"]) if env["XEJIT_TOOLCHAIN_DIR"] else defaults.toolchain_dir,
        ocloc=env["XEJIT_OCLOC"] or None,
        print_autotuning=flag(env["XEJIT_PRINT_AUTOTUNING"]),
    )


_last: tuple[tuple[str | None, ...], Options] | None = None


def current() -> Options:
    """The options of the current environment (see the module docstring)."""
    global _last
    raw = tuple(os.environ.get(n) for n in _NAMES)
    if _last is None or _last[0] != raw:
        _last = (raw, _parse(raw))
    return _last[1]
