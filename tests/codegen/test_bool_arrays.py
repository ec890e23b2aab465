"""Bool arrays on every code path (one byte per element in memory): loaded as masks, stored back."""
import numpy as np
import pytest

import xejit
import xejit.language as xl


@xejit.kernel
def masked_pick(m, a, y, keep, BM: xl.constexpr, BN: xl.constexpr):
    r = xl.program_id(0) * BM
    mask = xl.load_tile(xl.init_tile(m, [r, 0], [BM, BN]))
    v = xl.load_tile(xl.init_tile(a, [r, 0], [BM, BN]))
    xl.store_tile(xl.init_tile(y, [r, 0], [BM, BN]), xl.where(mask, v, -v))
    xl.store_tile(xl.init_tile(keep, [r, 0], [BM, BN]), mask & (v > 1.5))


@pytest.mark.parametrize("emulate", [None, "pvc", "dg2"])
def test_bool_arrays_load_and_store(emulate, monkeypatch):
    if emulate:       # was an LLVM IR parse error ("invalid cast from i1 to i8") on the XeGPU path
        monkeypatch.setenv("XEJIT_EMULATE", emulate)
    rng = np.random.default_rng(11)
    m = rng.random((20, 16)) > 0.5
    a = rng.uniform(1, 2, (20, 16)).astype(np.float32)
    y = np.full((20, 16), np.nan, np.float32)
    keep = np.ones((20, 16), bool) ^ m          # poisoned: the opposite of the mask
    masked_pick[(3,)](m, a, y, keep, BM=8, BN=16)
    np.testing.assert_array_equal(y, np.where(m, a, -a))
    np.testing.assert_array_equal(keep, m & (a > 1.5))
