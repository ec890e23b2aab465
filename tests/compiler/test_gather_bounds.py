"""Memory safety of unmasked gathers and scatters: offsets outside the array's memory span read
the padding / are dropped on every target (never a crash, never a write outside the array)."""
import numpy as np
import pytest

import xejit
import xejit.language as xl
from xejit.runtime import usm


@xejit.kernel
def gather_scatter(x, idx, y, z, BN: xl.constexpr):
    offs = xl.load_tile(xl.init_tile(idx, [0, 0], [1, BN]))
    vals = xl.load_gather(xl.init_tile(x, offs), padding=-1.0)        # no mask
    xl.store_tile(xl.init_tile(y, [0, 0], [1, BN]), vals)
    xl.store_scatter(xl.init_tile(z, offs), vals * 2.0)                  # no mask


BAD = [-10_000_000, -1, 40, 41, 10_000_000, 2**40]


@pytest.mark.parametrize("emulate", [None, "pvc", "dg2"])
def test_out_of_range_offsets_read_padding_and_write_nothing(emulate, monkeypatch):
    if emulate:
        monkeypatch.setenv("XEJIT_EMULATE", emulate)
    rng = np.random.default_rng(7)
    BN = 16
    # x and z are views into the middle of larger USM allocations: guard zones on both sides
    # must be untouched and must not be read
    xbuf = usm.asarray(rng.uniform(1, 2, 3 * 40).astype(np.float32))
    zbuf = usm.asarray(np.full(3 * 40, 7.0, np.float32))
    x, z = xbuf[40:80], zbuf[40:80]
    good = rng.choice(40, BN - len(BAD), replace=False)
    idx = np.concatenate([good, BAD]).astype(np.int64)
    rng.shuffle(idx)
    y = np.full((1, BN), np.nan, np.float32)
    gather_scatter[(1,)](x, idx.reshape(1, BN), y, z, BN=BN)
    inside = (idx >= 0) & (idx < 40)
    want = np.where(inside, np.asarray(x)[np.clip(idx, 0, 39)], -1.0).astype(np.float32)
    np.testing.assert_array_equal(y[0], want)
    zz = np.asarray(zbuf)
    np.testing.assert_array_equal(zz[:40], 7.0)                       # nothing written before z
    np.testing.assert_array_equal(zz[80:], 7.0)                       # nor after it
    expect = np.full(40, 7.0, np.float32)
    expect[idx[inside]] = 2 * want[inside]
    np.testing.assert_array_equal(zz[40:80], expect)
