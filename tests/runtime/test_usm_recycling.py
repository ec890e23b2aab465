"""usm.empty reuses the USM buffer of an array that died (xejit.runtime.usm._recycled), never one
that any array or view still uses, and launches see recycled arrays as USM memory (no copy)."""
import gc

import numpy as np

import xejit
from xejit.runtime import usm
from xejit.runtime.launch import _usm_owner


def _addr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_a_dead_arrays_buffer_is_reused_and_a_live_views_is_not():
    a = usm.empty((32, 32), np.float32)
    p = _addr(a)
    view = a[3:, ::2]
    del a
    gc.collect()
    b = usm.empty((32, 32), np.float32)
    assert _addr(b) != p                  # `view` still uses that buffer
    b[...] = 1.0
    view[...] = 7.0                       # writes its own buffer, not b's
    assert (b == 1.0).all()
    del view
    c = usm.empty((32, 32), np.float32)
    assert _addr(c) == p                  # now free: reused


def test_recycled_arrays_are_usm_arrays_in_both_orders():
    for order in ("C", "F"):
        a = usm.empty((5, 7), np.float64, order=order)
        assert _usm_owner(a) is not None
        assert (a.flags.c_contiguous if order == "C" else a.flags.f_contiguous)
        assert a.shape == (5, 7) and a.dtype == np.float64


def test_matmul_results_stay_correct_when_buffers_are_reused():
    rng = np.random.default_rng(3)
    a, b = (usm.asarray(rng.standard_normal((64, 64)).astype(np.float32)) for _ in range(2))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    kept = xejit.matmul(a, b)
    for _ in range(5):                    # each result dies at once: its buffer comes back
        c = xejit.matmul(a, b)
        np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4)
        c[...] = np.nan                   # poison what the next call may get
        del c
    np.testing.assert_allclose(kept, ref, rtol=1e-4, atol=1e-4)   # never handed out while alive
