"""Defects the hostile suite found and that are not fixed yet, as strict xfails: each starts
failing (XPASS) the day it is fixed, so the mark is removed with the fix (the test stays, as a
regression test).

Fixed: 2D block IO coordinates are i32 in the message, and the XeGPU lowering truncated a tile's
i64 row and column, so a tile at row 2**32 + r was read from / written to row r on targets with
2D block IO (pvc, bmg, lnl, ptl). Now a coordinate that does not fit is put far out of bounds
where it enters i32 (``codegen/block_coords.py``): at descriptor creation and on moves by
anything but small constants, never per k-step (tests/codegen/xegpu/test_block_coords.py covers
the k-loop's fast version).
"""
import numpy as np
import pytest

import xejit
import xejit.language as xl
from tests.helpers import use_mode

FAR = 2**32      # truncates to row 0


@xejit.kernel
def far_tiles(x, y, z, R: xl.constexpr, BM: xl.constexpr, BN: xl.constexpr):
    t = xl.load_tile(xl.init_tile(x, [R, 0], [BM, BN]), padding=0)
    xl.store_tile(xl.init_tile(y, [0, 0], [BM, BN]), t)
    xl.store_tile(xl.init_tile(z, [R, 0], [BM, BN]), t + 1.0)


def _run(mode, monkeypatch):
    use_mode(monkeypatch, mode)
    x = np.random.default_rng(2).uniform(1, 2, (16, 16)).astype(np.float32)
    y, z = np.full((8, 16), np.nan, np.float32), np.full((16, 16), 7.0, np.float32)
    far_tiles[(1,)](x, y, z, R=FAR, BM=8, BN=16)
    return y, z


@pytest.mark.parametrize("mode", ["interpret", "generic", "dg2"])
def test_far_tiles_read_padding_and_write_nothing(mode, monkeypatch):
    y, z = _run(mode, monkeypatch)
    np.testing.assert_array_equal(y, 0.0)
    np.testing.assert_array_equal(z, 7.0)


def test_far_tiles_on_2d_block_io_targets(monkeypatch):
    y, z = _run("pvc", monkeypatch)
    np.testing.assert_array_equal(y, 0.0)
    np.testing.assert_array_equal(z, 7.0)
