"""Integer division and remainder by zero give 0 (numpy's result; LLVM leaves it undefined), and
MIN // -1 wraps to MIN, on every target and in the interpreter."""
import numpy as np
import pytest

import xejit
import xejit.language as xl
from tests.helpers import use_mode


@xejit.kernel
def divmod_kernel(a, b, q, r, BN: xl.constexpr):
    x = xl.load_tile(xl.init_tile(a, [0, 0], [1, BN]))
    y = xl.load_tile(xl.init_tile(b, [0, 0], [1, BN]))
    xl.store_tile(xl.init_tile(q, [0, 0], [1, BN]), x // y)
    xl.store_tile(xl.init_tile(r, [0, 0], [1, BN]), x % y)


@pytest.mark.parametrize("mode", ["interpret", "generic", "pvc", "dg2"])
def test_division_by_zero_and_overflow(mode, monkeypatch):
    use_mode(monkeypatch, mode)
    lo = np.iinfo(np.int32).min
    a = np.array([7, -7, 7, -7, 5, -5, 0, lo, lo, 9, -9, 100, 3, -3, 13, 2**31 - 1], np.int32).reshape(1, 16)
    b = np.array([2, 2, -2, -2, 0, 0, 0, -1, 1, 4, 4, 7, 3, 3, -5, -1], np.int32).reshape(1, 16)
    q, r = np.full((1, 16), 99, np.int32), np.full((1, 16), 99, np.int32)
    divmod_kernel[(1,)](a, b, q, r, BN=16)
    aa, bb = a.astype(np.int64), b.astype(np.int64)
    safe = np.where(bb == 0, 1, bb)
    want_q = np.where(bb == 0, 0, np.floor_divide(aa, safe)).astype(np.int64)
    want_q = ((want_q + 2**31) % 2**32 - 2**31).astype(np.int32)              # MIN // -1 wraps
    want_r = np.where(bb == 0, 0, np.fmod(aa, safe)).astype(np.int32)         # % is C's remainder
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_array_equal(r, want_r)
