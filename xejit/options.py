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
``XEJIT_VALIDATE``        run spirv-val on every emitted module (the test suite sets it)
``XEJIT_MATMUL_TUNE``     ``xejit.matmul``'s tuning (docs/autotune-and-matmul.md), with
                          ``XEJIT_MATMUL_TUNE_WARMUP_MS`` / ``_REP_MS`` (10 / 40 ms)
``XEJIT_ATTENTION_TUNE``  the same for ``xejit.attention`` (``XEJIT_ATTENTION_TUNE_WARMUP_MS`` /
                          ``_REP_MS``)
``XEJIT_HOST_ARRAYS``     ``copy``: stage numpy / torch CPU arrays in USM memory even on a device
                          that reads host memory (default: passed by address, no copy)
``XEJIT_BUILD_LOG``       a file that receives a JSON line per driver build (seconds, SPIR-V
                          size, kernels, the running test): how build times are surveyed
``XEJIT_CPU_AFFINITY``    ``runtime``: keep the OpenCL CPU runtime's pinning of its worker threads
                          (default ``apart``: a worker pinned to the launching thread's CPU is moved
                          to a CPU without one; runtime/cpu_threads.py)
``XEJIT_CPU_BF16_DOT``    ``0``: bf16 GEMMs on the CPU device keep the fp32 kernels even where the
                          CPU has bf16 dot products (default: used where the probe passes;
                          xejit/cpu_simd_gemm.py)
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

from .errors import XejitValueError

__all__ = ["LAUNCH_NAMES", "Options", "current", "flag", "raw", "raw_launch"]

_NAMES = ("XEJIT_INTERPRET", "XEJIT_EMULATE", "XEJIT_DEVICE", "XEJIT_DEBUG", "XEJIT_STRICT",
          "XEJIT_DUMP", "XEJIT_DEVICE_BUILD", "XEJIT_CACHE_DIR", "XEJIT_TOOLCHAIN_DIR", "XEJIT_OCLOC",
          "XEJIT_PRINT_AUTOTUNING", "XEJIT_VALIDATE", "XEJIT_MATMUL_TUNE", "XEJIT_MATMUL_TUNE_WARMUP_MS",
          "XEJIT_MATMUL_TUNE_REP_MS", "XEJIT_ATTENTION_TUNE", "XEJIT_ATTENTION_TUNE_WARMUP_MS",
          "XEJIT_ATTENTION_TUNE_REP_MS", "XEJIT_HOST_ARRAYS", "XEJIT_BUILD_LOG", "XEJIT_CPU_AFFINITY",
          "XEJIT_CPU_BF16_DOT")
_OFF = ("", "0", "false", "no", "off")

# CPython keeps os.environ's contents in a dict of encoded keys; reading it directly is a dict
# lookup a variable instead of ~1 us (encode, Mapping.get) -- this runs on every launch. Any other
# os.environ implementation is read through os.environ.get.
_DATA = getattr(os.environ, "_data", None)
try:
    _KEYS = tuple(os.environ.encodekey(n) for n in _NAMES)   # type: ignore[attr-defined]
except AttributeError:
    _DATA = None
if not isinstance(_DATA, dict):
    _DATA = None


#: the variables that change what a launch of an already compiled kernel runs (the interpreter,
#: an emulated target, the device, a debug build); the rest only matter when compiling or tuning
LAUNCH_NAMES = ("XEJIT_INTERPRET", "XEJIT_EMULATE", "XEJIT_DEVICE", "XEJIT_DEBUG", "XEJIT_HOST_ARRAYS")
_LAUNCH_KEYS = tuple(os.environ.encodekey(n) for n in LAUNCH_NAMES) if _DATA is not None else ()


def raw() -> tuple:
    """The raw values of every ``XEJIT_*`` variable (cheap: a key for caches of launch decisions)."""
    if _DATA is not None:
        return tuple(map(_DATA.get, _KEYS))
    return tuple(os.environ.get(n) for n in _NAMES)


def raw_launch() -> tuple:
    """The raw values of :data:`LAUNCH_NAMES` (read on every prepared launch: four dict lookups)."""
    if _DATA is not None:
        return tuple(map(_DATA.get, _LAUNCH_KEYS))
    return tuple(os.environ.get(n) for n in LAUNCH_NAMES)


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
    validate: bool = False
    matmul_tune: str | None = None
    matmul_tune_warmup_ms: float = 10.0
    matmul_tune_rep_ms: float = 40.0
    attention_tune: str | None = None
    attention_tune_warmup_ms: float = 10.0
    attention_tune_rep_ms: float = 40.0
    host_arrays: str | None = None
    build_log: str | None = None
    cpu_affinity: str | None = None
    cpu_bf16_dot: bool = True


def _ms(env: dict, name: str, default: float) -> float:
    v = env[name]
    if v is None or not v.strip():
        return default
    try:
        return float(v)
    except ValueError:
        raise XejitValueError(f"{name}={v!r} is not a number of milliseconds") from None


def _parse(values: tuple) -> Options:
    env = {n: (v.decode() if isinstance(v, bytes) else v) for n, v in zip(_NAMES, values)}
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
        validate=flag(env["XEJIT_VALIDATE"]),
        matmul_tune=(env["XEJIT_MATMUL_TUNE"] or "").strip().lower() or None,
        matmul_tune_warmup_ms=_ms(env, "XEJIT_MATMUL_TUNE_WARMUP_MS", defaults.matmul_tune_warmup_ms),
        matmul_tune_rep_ms=_ms(env, "XEJIT_MATMUL_TUNE_REP_MS", defaults.matmul_tune_rep_ms),
        attention_tune=(env["XEJIT_ATTENTION_TUNE"] or "").strip().lower() or None,
        attention_tune_warmup_ms=_ms(env, "XEJIT_ATTENTION_TUNE_WARMUP_MS", defaults.attention_tune_warmup_ms),
        attention_tune_rep_ms=_ms(env, "XEJIT_ATTENTION_TUNE_REP_MS", defaults.attention_tune_rep_ms),
        host_arrays=_host_arrays(env["XEJIT_HOST_ARRAYS"]),
        build_log=env["XEJIT_BUILD_LOG"] or None,
        cpu_affinity=_cpu_affinity(env["XEJIT_CPU_AFFINITY"]),
        cpu_bf16_dot=env["XEJIT_CPU_BF16_DOT"] is None or flag(env["XEJIT_CPU_BF16_DOT"]),
    )


def _host_arrays(v: str | None) -> str | None:
    v = (v or "").strip().lower() or None
    if v not in (None, "copy", "address"):
        raise XejitValueError(f"XEJIT_HOST_ARRAYS must be 'copy' or 'address', got {v!r}")
    return v


def _cpu_affinity(v: str | None) -> str | None:
    v = (v or "").strip().lower() or None
    if v not in (None, "runtime", "apart"):
        raise XejitValueError(f"XEJIT_CPU_AFFINITY must be 'runtime' or 'apart', got {v!r}")
    return v


_last: tuple[tuple[str | None, ...], Options] | None = None


def current() -> Options:
    """The options of the current environment (see the module docstring)."""
    global _last
    values = raw()
    if _last is None or _last[0] != values:
        _last = (values, _parse(values))
    return _last[1]
