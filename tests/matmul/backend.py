"""The one place the autotune and matmul tests decide between the device and the interpreter.

DSL kernels run on the device. Only when the user forces the interpreter (``XEJIT_INTERPRET=1``)
do the tests run there, and then the tests that need the device skip, saying so. A broken
device path fails the tests: it never falls back to the interpreter silently.
"""
from __future__ import annotations

import functools
import os

import numpy as np
import pytest

import xejit
import xejit.language as xl


@xejit.kernel
def _probe(x, y, BN: xl.constexpr):
    t = xl.load_tile(xl.init_tile(x, [0, 0], [1, BN]))
    xl.store_tile(xl.init_tile(y, [0, 0], [1, BN]), t + 1.0)


@functools.lru_cache(maxsize=None)
def device_status() -> str | None:
    """None when DSL kernels run on the device, else why they do not."""
    saved = os.environ.pop("XEJIT_INTERPRET", None)
    try:
        x = np.arange(16, dtype=np.float32)
        y = np.zeros_like(x)
        _probe[(1,)](x, y, BN=16)
        if not np.array_equal(y, x + 1):
            return f"the device path of DSL kernels gives wrong results ({y.tolist()})"
        return None
    except Exception as e:  # noqa: BLE001  (any failure means: not usable)
        return f"the device path of DSL kernels fails: {type(e).__name__}: {e}".splitlines()[0]
    finally:
        if saved is not None:
            os.environ["XEJIT_INTERPRET"] = saved


def forced_interpreter() -> bool:
    return os.environ.get("XEJIT_INTERPRET", "0") not in ("", "0")


def use_backend(monkeypatch: pytest.MonkeyPatch) -> str:
    """Select the backend for one test: the device when it works, else the interpreter."""
    if forced_interpreter():
        return "interpreter (XEJIT_INTERPRET set)"
    if device_status() is not None:
        pytest.fail(device_status())
    return "device"


requires_device = pytest.mark.skipif(forced_interpreter(),
                                     reason="XEJIT_INTERPRET=1 forces the interpreter; this test needs the device")


#: True when the kernels of these tests run on the device (each new specialization then costs a
#: driver build of many seconds on the CPU device).
ON_DEVICE = device_status() is None and not forced_interpreter()


def heavy_on_device(*values, core: bool = False):
    """A ``pytest.param`` that is ``slow`` when running on the device (unless ``core``): under the
    interpreter every case runs by default; on the device the default run keeps a core subset."""
    marks = [pytest.mark.slow] if ON_DEVICE and not core else []
    return pytest.param(*values, marks=marks)
