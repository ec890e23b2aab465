"""Attention on the GPU code paths: Intel's compiler's verdict on pvc (both products on DPAS,
no spills) and runs on the CPU device with DPAS / 2D block IO emulated (pvc, dg2)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import xejit
from xejit.attention import head_pad
from xejit.codegen.intel_compiler import require_toolchain
from xejit.kernels.attention import LOG2E, attn_fwd_kernel, configs_for
from tests.attention.helpers import check, rand, reference
from tests.matmul.backend import requires_device
from tests.matmul.helpers import poisoned


def _pvc_compile(config, D, causal=True, dtype="float16"):
    B, H, Sq, Sk = 2, 4, 256, 256
    BD = head_pad(D)
    q = np.ones((B * H * Sq, D), dtype)
    k = np.ones((B * H * Sk, D), dtype)
    o = np.ones((Sq, B * H * BD), dtype)
    lse = np.ones((Sq, B * H), np.float32)
    return attn_fwd_kernel.compile(q, k.T, k, o, lse, Sq, Sk, H, 1, LOG2E / 8, BD=BD, CAUSAL=causal,
                                   target="pvc", **config.all_kwargs())


def _dpas_per_step(config, D):
    """The tile arithmetic: per subgroup (BM/SG) x BN scores over BD, then (BM/SG) x BD over BN;
    pvc's DPAS is 8 x 16 x 16 (fp16)."""
    kw = config.kwargs
    m, bd = kw["BM"] // kw["SG"] // 8, head_pad(D)
    return m * (kw["BN"] // 16) * (bd // 16) + m * (bd // 16) * (kw["BN"] // 16)


@pytest.mark.parametrize("D", [64, 128])
def test_pvc_chosen_configs_use_dpas_and_do_not_spill(D):
    require_toolchain()   # fails, never skips, without Intel's compiler (as tests/codegen do)
    configs = configs_for("pvc")[:1] if D == 128 else configs_for("pvc")[:2]
    for config in configs:
        ck = _pvc_compile(config, D)
        b = ck.device_binary
        assert b is not None, "Intel's compiler did not build the module"
        assert b.spill_bytes == 0 and b.private_bytes == 0, (config, b.summary())
        assert b.hot_loop is not None and b.hot_loop.dpas == _dpas_per_step(config, D), (config, b.hot_loop)
        assert b.hot_loop.spill_sends == 0 and b.hot_loop.block_loads >= 2
        rep = ck.report()
        assert "fma (software" not in rep, rep


EMULATED = [
    ("pvc", "float16", 2, 4, 2, 37, 45, 64, True),
    ("dg2", "bfloat16", 1, 2, 1, 20, 33, 80, False),
    pytest.param("pvc", "bfloat16", 1, 2, 2, 1, 50, 128, False, marks=pytest.mark.slow),
    pytest.param("pvc", "float16", 1, 2, 1, 50, 20, 96, True, marks=pytest.mark.slow),
    pytest.param("dg2", "float16", 1, 4, 2, 33, 40, 64, True, marks=pytest.mark.slow),
]


@requires_device
@pytest.mark.parametrize("target,dtype,B,H,Hkv,Sq,Sk,D,causal", EMULATED)
def test_attention_emulated(target, dtype, B, H, Hkv, Sq, Sk, D, causal, monkeypatch):
    monkeypatch.setenv("XEJIT_EMULATE", target)
    monkeypatch.setenv("XEJIT_ATTENTION_TUNE", "0")
    rng = np.random.default_rng(B * 1000 + Sq * 10 + D)
    q = rand(rng, (B, H, Sq, D), dtype, "torch")
    k = rand(rng, (B, Hkv, Sk, D), dtype, "torch")
    v = rand(rng, (B, Hkv, Sk, D), dtype, "torch")
    out = poisoned(tuple(q.shape), dtype, "torch")
    xejit.attention(q, k, v, causal=causal, out=out)
    check(out, reference(q, k, v, causal), dtype)
