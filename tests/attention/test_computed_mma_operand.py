"""What attention needed from the DSL: a tile_mma A operand computed in registers (softmax
probabilities) reaches the DPAS on Intel GPU targets through ``convert_layout`` (always through
SLM when its result feeds a tile_mma, even to the same layout); numpy semantics unchanged."""
from __future__ import annotations

import numpy as np
import pytest

import xejit
import xejit.language as xl
from tests.matmul.backend import requires_device


@xejit.kernel
def exp_mma(a, b, c, BM: xl.constexpr, BN: xl.constexpr, BK: xl.constexpr, SG: xl.constexpr,
            CONVERT: xl.constexpr):
    x = xl.load_tile(xl.init_tile(a, [0, 0], [BM, BK])).to(xl.float32)
    p = xl.exp(x - xl.max(x, axis=1)).to(a.dtype)          # computed, not loaded
    if CONVERT:
        p = xl.convert_layout(p, xl.wg_map([SG, 1], [BM // SG, BK]))
    acc = xl.tile_mma(p, xl.load_tile(xl.init_tile(b, [0, 0], [BK, BN])),
                      wg_map=xl.wg_map([SG, 1], [BM // SG, BN]))
    xl.store_tile(xl.init_tile(c, [0, 0], [BM, BN]), acc)


def _args(rng, BM=16, BN=32, BK=32):
    a = (rng.standard_normal((BM, BK)) + 0.1).astype(np.float16)
    b = (rng.standard_normal((BK, BN)) + 0.1).astype(np.float16)
    return a, b, np.full((BM, BN), np.nan, np.float32)


def _ref(a, b):
    x = a.astype(np.float64)
    p = np.exp(x - x.max(1, keepdims=True)).astype(np.float16).astype(np.float64)
    return p @ b.astype(np.float64)


def test_computed_operand_needs_convert_layout_on_pvc():
    a, b, c = _args(np.random.default_rng(0))
    with pytest.raises(xejit.XejitError, match="must come straight from load_tile"):
        exp_mma.compile(a, b, c, BM=16, BN=32, BK=32, SG=2, CONVERT=False, target="pvc", num_subgroups=2)
    for sg in (1, 2):
        ck = exp_mma.compile(a, b, c, BM=16, BN=32, BK=32, SG=sg, CONVERT=True, target="pvc", num_subgroups=sg)
        rep = ck.report()
        assert "SLM buffer 16x32xf16" in rep and "dpas" in rep and "fma (software" not in rep, rep
        assert ck.device_binary.spill_bytes == 0


def test_same_layout_convert_keeps_numpy_semantics():
    # 8x16x16: the CPU driver's build of the 16x32x32 kernel takes about 35 s
    a, b, c = _args(np.random.default_rng(1), 8, 16, 16)
    exp_mma[(1,)](a, b, c, BM=8, BN=16, BK=16, SG=2, CONVERT=True, num_subgroups=2)
    assert np.abs(c - _ref(a, b)).max() / np.abs(_ref(a, b)).max() <= 1e-2


@requires_device
@pytest.mark.slow   # the emulated pvc forward of tests/attention/test_attention_gpu.py covers it
def test_same_layout_convert_emulated_pvc(monkeypatch):
    monkeypatch.setenv("XEJIT_EMULATE", "pvc")
    a, b, c = _args(np.random.default_rng(2))
    exp_mma[(1,)](a, b, c, BM=16, BN=32, BK=32, SG=2, CONVERT=True, num_subgroups=2)
    assert np.abs(c - _ref(a, b)).max() / np.abs(_ref(a, b)).max() <= 1e-2
