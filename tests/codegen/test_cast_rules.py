"""Casts follow one rule on every target and in the interpreter: float -> int truncates toward
zero and saturates (NaN -> 0), anything -> bool is ``x != 0`` (numpy's rule where numpy has one)."""
import numpy as np
import pytest

import xejit
import xejit.language as xl
from xejit.ir.core import round_to_bf16
from tests.helpers import use_mode

SPECIAL = [-1e10, -129.7, -128.5, -3.7, -0.5, 0.0, 0.5, 2.9, 127.9, 128.0, 255.9, 300.0, 1e10,
           np.nan, np.inf, -np.inf]
# Exactly one below the smallest value of a type: truncated, it does not fit (saturates to min).
# -1.0 -> uint8 gave 255 on dg2 (found by the hostile suite), -129.0 -> int8 likewise.
BOUNDARY = [-129.0, -1.0, -128.0, -0.999, -2.0**31, -2.0**32, 256.0, 255.0, -130.0, -1.5, 2.0**31,
            -0.0, 1.0, 127.0, -127.999, 0.999]


@xejit.kernel
def casts(x, a, u, w, t, BN: xl.constexpr):
    v = xl.load_tile(xl.init_tile(x, [0, 0], [1, BN]))
    xl.store_tile(xl.init_tile(a, [0, 0], [1, BN]), v.to(xl.int8))
    xl.store_tile(xl.init_tile(u, [0, 0], [1, BN]), v.to(xl.uint8))
    xl.store_tile(xl.init_tile(w, [0, 0], [1, BN]), v.to(xl.int32))
    xl.store_tile(xl.init_tile(t, [0, 0], [1, BN]), (v.to(xl.int32) + 0).to(xl.int8).to(xl.int32))


def _rule(x, dt):
    """The documented rule, written out element by element in Python."""
    info = np.iinfo(dt)
    out = []
    for v in np.asarray(x, np.float64).ravel():
        out.append(0 if np.isnan(v) else info.max if v >= info.max + 1 else info.min if v <= info.min - 1
                   else int(np.trunc(v)))
    return np.array(out, dt).reshape(np.shape(x))


@pytest.mark.parametrize("values", ["special", "boundary"])
@pytest.mark.parametrize("mode", ["interpret", "generic", "pvc", "dg2"])
def test_float_to_int_saturates_on_every_target(mode, values, monkeypatch):
    use_mode(monkeypatch, mode)
    BN = 16
    x = np.array(SPECIAL if values == "special" else BOUNDARY, np.float32).reshape(1, BN)
    outs = [np.full((1, BN), 99, dt) for dt in (np.int8, np.uint8, np.int32, np.int32)]
    casts[(1,)](x, *outs, BN=BN)
    np.testing.assert_array_equal(outs[0], _rule(x, np.int8))
    np.testing.assert_array_equal(outs[1], _rule(x, np.uint8))
    np.testing.assert_array_equal(outs[2], _rule(x, np.int32))
    # int -> narrower int wraps (two's complement), as numpy's astype
    np.testing.assert_array_equal(outs[3], _rule(x, np.int32).astype(np.int8).astype(np.int32))


@xejit.kernel
def to_bool(x, k, y, z, BN: xl.constexpr):
    v = xl.load_tile(xl.init_tile(x, [0, 0], [1, BN]))
    i = xl.load_tile(xl.init_tile(k, [0, 0], [1, BN]))
    xl.store_tile(xl.init_tile(y, [0, 0], [1, BN]), v.to(xl.int1).to(xl.int32))
    xl.store_tile(xl.init_tile(z, [0, 0], [1, BN]), i.to(xl.int1).to(xl.int32))


@pytest.mark.parametrize("mode", ["interpret", "generic", "pvc"])
def test_to_bool_is_not_zero(mode, monkeypatch):
    use_mode(monkeypatch, mode)
    BN = 16
    x = np.array(SPECIAL, np.float32).reshape(1, BN)
    k = np.array([0, 1, 2, -1, 4, 256, -256, 3, 0, 8, 16, 5, 0, 7, 9, 2**30], np.int32).reshape(1, BN)
    y, z = np.full((1, BN), 99, np.int32), np.full((1, BN), 99, np.int32)
    to_bool[(1,)](x, k, y, z, BN=BN)
    np.testing.assert_array_equal(y, (x != 0).astype(np.int32))
    np.testing.assert_array_equal(z, (k != 0).astype(np.int32))


@xejit.kernel
def bool_to_float(x, y, BM: xl.constexpr, BN: xl.constexpr):
    v = xl.load_tile(xl.init_tile(x, [0, 0], [BM, BN]))
    xl.store_tile(xl.init_tile(y, [0, 0], [BM, BN]), v.to(xl.int1).to(xl.float32) * 3.0 - 1.0)


@pytest.mark.parametrize("mode", ["interpret", "generic", "pvc", "dg2"])
def test_bool_to_float_blocks(mode, monkeypatch):
    """bool -> float of a block of several elements per lane (on the XeGPU path a `uitofp <n x i1>`
    crashed LLVM's SPIR-V backend; found by tests/hostile)."""
    use_mode(monkeypatch, mode)
    rng = np.random.default_rng(11)
    x = (rng.uniform(-2, 2, (8, 16)) * rng.integers(0, 2, (8, 16))).astype(np.float32)
    x.flat[:4] = [np.nan, np.inf, -0.0, 0.0]
    y = np.full((8, 16), np.nan, np.float32)
    bool_to_float[(1,)](x, y, BM=8, BN=16)
    np.testing.assert_array_equal(y, np.where(x.astype(np.float64) != 0, 2.0, -1.0))


@xejit.kernel
def bf16_to_u8(x, y, BM: xl.constexpr, BN: xl.constexpr):
    m = xl.program_id(0) * BM
    t = xl.load_tile(xl.init_tile(x, [m, 0], [BM, BN]))
    xl.store_tile(xl.init_tile(y, [m, 0], [BM, BN]), t.to(xl.bfloat16).to(xl.float32).to(xl.uint8))


@pytest.mark.parametrize("mode", ["interpret", "generic", "pvc", "dg2"])
def test_minus_one_to_unsigned_is_zero(mode, monkeypatch):
    """Found by the hostile suite on dg2: -0.999 (-1.0 in bf16) -> uint8 gave 255; trunc(-1.0)
    does not fit uint8, so it saturates to 0 (the same rule for lo - 1 of signed types)."""
    use_mode(monkeypatch, mode)
    x = np.random.default_rng(1).uniform(-4, 4, (16, 16)).astype(np.float32)
    x.flat[[3, 5, 6, 7, 40]] = [300.5, -1.0, -0.999, -129.0, -1e6]
    y = np.full((16, 16), 99, np.uint8)
    bf16_to_u8[(2,)](x, y, BM=8, BN=16)
    ref = _rule(round_to_bf16(x), np.uint8)
    np.testing.assert_array_equal(y, ref)
