"""loss.backward() through xejit.attention (the DSL backward kernels, FlashAttention-2's recompute)
against float64 autograd of torch's SDPA; gradients of random non-zero inputs and upstream grads.

On the device each case is three CPU-driver builds (the forward, which always stores the row
log-sum-exp, dq and dk/dv): one core case by default (its forward is the forward tests' core
case), the rest ``slow``."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import xejit
from tests.attention.helpers import check, rand
from tests.matmul.backend import heavy_on_device, requires_device

#          dtype       B  H  Hkv Sq  Sk  D    causal
CASES = [
    heavy_on_device("float32", 2, 4, 2, 37, 45, 64, True, core=True),
    heavy_on_device("float32", 1, 2, 2, 50, 20, 96, True),
    heavy_on_device("float16", 0, 2, 1, 29, 29, 80, False),
    heavy_on_device("bfloat16", 1, 4, 1, 1, 70, 64, False),
    heavy_on_device("bfloat16", 1, 2, 2, 33, 65, 128, True),
]


def _grads(dtype, B, H, Hkv, Sq, Sk, D, causal, fn):
    """Random non-zero q, k, v (requiring grad) and upstream gradient weights w."""
    rng = np.random.default_rng(Sq * 100 + Sk + D)
    lead = (B,) if B else ()
    q = rand(rng, lead + (H, Sq, D), dtype, "torch").requires_grad_()
    k = rand(rng, lead + (Hkv, Sk, D), dtype, "torch").requires_grad_()
    v = rand(rng, lead + (Hkv, Sk, D), dtype, "torch").requires_grad_()
    w = rand(rng, lead + (H, Sq, D), dtype, "torch")
    return q, k, v, w


@pytest.mark.parametrize("dtype,B,H,Hkv,Sq,Sk,D,causal", CASES)
def test_backward_matches_float64_sdpa(dtype, B, H, Hkv, Sq, Sk, D, causal):
    q, k, v, w = _grads(dtype, B, H, Hkv, Sq, Sk, D, causal, None)
    out = xejit.attention(q, k, v, causal=causal)
    (out * w).sum().backward()
    qd, kd, vd = (x.detach().double().requires_grad_() for x in (q, k, v))
    ref = F.scaled_dot_product_attention(qd, kd, vd, is_causal=causal, enable_gqa=True)
    (ref * w.double()).sum().backward()
    check(out, ref.detach().numpy(), dtype)
    for got, want in ((q.grad, qd.grad), (k.grad, kd.grad), (v.grad, vd.grad)):
        assert got.dtype == q.dtype and got.shape == want.shape
        check(got, want.numpy(), dtype)


def test_backward_through_torch_compile():
    q, k, v, w = _grads("float32", 2, 4, 2, 37, 45, 64, True, None)
    fn = torch.compile(lambda a, b, c: (torch.ops.xejit.attention(a, b, c, True, None) * w).sum(),
                       backend="aot_eager")
    fn(q, k, v).backward()
    qd, kd, vd = (x.detach().double().requires_grad_() for x in (q, k, v))
    (F.scaled_dot_product_attention(qd, kd, vd, is_causal=True, enable_gqa=True) * w.double()).sum().backward()
    for got, want in ((q.grad, qd.grad), (k.grad, kd.grad), (v.grad, vd.grad)):
        check(got, want.numpy(), "float32")


def test_out_with_autograd_is_refused():
    q, k, v, _ = _grads("float32", 1, 2, 2, 8, 8, 64, False, None)
    with pytest.raises(RuntimeError, match="autograd"):
        xejit.attention(q, k, v, out=torch.empty_like(q))


@requires_device
@pytest.mark.slow
@pytest.mark.parametrize("target", ["pvc", "dg2"])
def test_backward_emulated(target, monkeypatch):
    monkeypatch.setenv("XEJIT_EMULATE", target)
    q, k, v, w = _grads("float16", 1, 2, 1, 37, 45, 64, True, None)
    out = xejit.attention(q, k, v, causal=True)
    (out * w).sum().backward()
    qd, kd, vd = (x.detach().double().requires_grad_() for x in (q, k, v))
    (F.scaled_dot_product_attention(qd, kd, vd, is_causal=True, enable_gqa=True) * w.double()).sum().backward()
    for got, want in ((q.grad, qd.grad), (k.grad, kd.grad), (v.grad, vd.grad)):
        check(got, want.numpy(), "float16")
