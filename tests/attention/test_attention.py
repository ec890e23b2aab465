"""xejit.attention against a float64 numpy reference and torch's SDPA; outputs poisoned.

On the device every new (dtype, head dim, causal) is a CPU-driver build of 15 s to 2 minutes:
the default run keeps one case (fp32, D=64, GQA, causal with Sq != Sk), which the other default
tests reuse (same kernel specialization); the rest are ``slow`` (all run under the interpreter)."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
import torch

import xejit
from tests.attention.helpers import check, rand, reference, sdpa
from tests.matmul.backend import heavy_on_device
from tests.matmul.helpers import poisoned

#          dtype       lib      B  H  Hkv Sq  Sk  D    causal
CASES = [
    heavy_on_device("float32", "numpy", 2, 4, 2, 37, 45, 64, True, core=True),     # GQA, Sq != Sk
    heavy_on_device("float16", "torch", 0, 3, 3, 29, 29, 80, False),               # [H, S, D], D=80
    heavy_on_device("bfloat16", "torch", 2, 4, 1, 1, 70, 64, False),               # decode, MQA
    heavy_on_device("float32", "torch", 1, 2, 2, 50, 20, 96, True),                # Sq > Sk, causal
    heavy_on_device("float16", "numpy", 1, 2, 1, 64, 64, 128, True),
    heavy_on_device("bfloat16", "torch", 1, 4, 2, 33, 65, 128, True),
    heavy_on_device("float32", "numpy", 2, 2, 2, 1, 33, 80, True),                 # decode, causal
    heavy_on_device("float16", "torch", 1, 8, 2, 17, 100, 96, False),
]


def _inputs(dtype, lib, B, H, Hkv, Sq, Sk, D):
    rng = np.random.default_rng(zlib.crc32(repr((dtype, lib, B, H, Hkv, Sq, Sk, D)).encode()))
    lead = (B,) if B else ()
    q = rand(rng, lead + (H, Sq, D), dtype, lib)
    k = rand(rng, lead + (Hkv, Sk, D), dtype, lib)
    v = rand(rng, lead + (Hkv, Sk, D), dtype, lib)
    return q, k, v


@pytest.mark.parametrize("dtype,lib,B,H,Hkv,Sq,Sk,D,causal", CASES)
def test_attention_matches_float64_and_sdpa(dtype, lib, B, H, Hkv, Sq, Sk, D, causal):
    q, k, v = _inputs(dtype, lib, B, H, Hkv, Sq, Sk, D)
    ref = reference(q, k, v, causal)
    np.testing.assert_allclose(sdpa(q, k, v, causal), ref, rtol=1e-10, atol=1e-12)  # same semantics
    out = poisoned(q.shape, dtype, lib)
    r = xejit.attention(q, k, v, causal=causal, out=out)
    assert r is out
    check(out, ref, dtype)
    res = xejit.attention(q, k, v, causal=causal)
    assert type(res) is type(q) and res.dtype == q.dtype and tuple(res.shape) == tuple(q.shape)
    check(res, ref, dtype)


def test_scale_strided_inputs_and_torch_op():
    """A given scale, non-contiguous inputs (torch's [B, S, H, D] transposed views) and the
    registered op (same specialization as the first core case's dtype, other D is avoided)."""
    rng = np.random.default_rng(3)
    q = rand(rng, (2, 37, 4, 64), "float32", "torch").transpose(1, 2)
    k = rand(rng, (2, 45, 2, 64), "float32", "torch").transpose(1, 2)
    v = rand(rng, (2, 45, 2, 64), "float32", "torch").transpose(1, 2)
    ref = reference(q, k, v, True, 0.3)
    check(xejit.attention(q, k, v, causal=True, scale=0.3), ref, "float32")
    check(torch.ops.xejit.attention(q, k, v, True, 0.3), ref, "float32")


def test_torch_compile_uses_the_fake_implementation():
    """The first core case's specialization (float32, D=64, causal, Sq <= Sk); bf16 fake tensors."""
    rng = np.random.default_rng(4)
    q = rand(rng, (2, 4, 30, 64), "float32", "torch")
    k, v = (rand(rng, (2, 1, 70, 64), "float32", "torch") for _ in range(2))
    fn = torch.compile(lambda a, b, c: torch.ops.xejit.attention(a, b, c, True, None) * 2, backend="aot_eager")
    check(fn(q, k, v), 2 * reference(q, k, v, True), "float32")
    from torch._subclasses.fake_tensor import FakeTensorMode
    qb, kb = q.bfloat16(), k.bfloat16()
    with FakeTensorMode() as mode:
        fq, fk = mode.from_tensor(qb), mode.from_tensor(kb)
        r = torch.ops.xejit.attention(fq, fk, fk, True, None)
        assert r.shape == q.shape and r.dtype == torch.bfloat16


def test_empty_lengths_follow_torch():
    rng = np.random.default_rng(5)
    q = rand(rng, (1, 2, 5, 64), "float32", "torch")
    k0 = rand(rng, (1, 2, 0, 64), "float32", "torch")
    r = xejit.attention(q, k0, k0)
    assert torch.equal(r, torch.nn.functional.scaled_dot_product_attention(q, k0, k0))   # zeros
    k = rand(rng, (1, 2, 3, 64), "float32", "torch")
    assert xejit.attention(q[:, :, :0], k, k).shape == (1, 2, 0, 64)
    qn = rand(rng, (0, 2, 5, 64), "float32", "numpy")
    assert xejit.attention(qn, qn, qn).shape == (0, 2, 5, 64)


ERRORS = [
    # (q shape, k shape, v shape, exception, words in the message)
    ((2, 4, 8, 64), (2, 3, 8, 64), (2, 3, 8, 64), ValueError, "divide"),
    ((2, 4, 8, 64), (2, 4, 8, 32), (2, 4, 8, 32), ValueError, "head dims"),
    ((2, 4, 8, 64), (2, 4, 8, 64), (2, 4, 9, 64), ValueError, "same shape"),
    ((2, 4, 8, 64), (3, 4, 8, 64), (3, 4, 8, 64), ValueError, "batch"),
    ((8, 64), (8, 64), (8, 64), ValueError, "[B, H, S, D]"),
    ((2, 4, 8, 64), (4, 8, 64), (4, 8, 64), ValueError, "[B, H, S, D]"),
    ((1, 2, 4, 8, 64),) * 3 + (ValueError, "[B, H, S, D]"),
]


@pytest.mark.parametrize("qs,ks,vs,exc,words", ERRORS)
@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_bad_shapes(qs, ks, vs, exc, words, lib):
    rng = np.random.default_rng(6)
    q, k, v = (rand(rng, s, "float32", lib) for s in (qs, ks, vs))
    with pytest.raises(exc, match=None) as ei:
        xejit.attention(q, k, v)
    assert isinstance(ei.value, xejit.XejitError) and isinstance(ei.value, xejit.AttentionError)
    assert isinstance(ei.value, RuntimeError) and words in str(ei.value)
    assert str(list(qs)) in str(ei.value) or str(list(ks)) in str(ei.value)


def test_bad_types():
    rng = np.random.default_rng(7)
    q = rand(rng, (2, 8, 64), "float32", "numpy")
    t = rand(rng, (2, 8, 64), "float32", "torch")
    cases = [
        (lambda: xejit.attention(q.astype(np.float64), q, q), "unsupported dtype"),
        (lambda: xejit.attention(q.astype(np.int8), q.astype(np.int8), q.astype(np.int8)), "unsupported dtype"),
        (lambda: xejit.attention(q, q.astype(np.float16), q), "same dtype"),
        (lambda: xejit.attention(t, t.half(), t), "same dtype"),
        (lambda: xejit.attention(q, t, t), "all be torch tensors"),
        (lambda: xejit.attention([[1.0]], q, q), "not an array"),
        (lambda: xejit.attention(q, q, q, scale="0.1"), "scale"),
        (lambda: xejit.attention(q, q, q, causal="yes"), "causal"),
        (lambda: xejit.attention(q, q, q, out=t), "same kind"),
    ]
    for fn, words in cases:
        with pytest.raises(TypeError) as ei:
            fn()
        assert isinstance(ei.value, xejit.XejitError) and words in str(ei.value), str(ei.value)
    with pytest.raises(ValueError, match="must be float32"):
        xejit.attention(q, q, q, out=np.empty((2, 8, 32), np.float32))
    with pytest.raises(ValueError, match="read-only"):
        ro = np.empty_like(q)
        ro.flags.writeable = False
        xejit.attention(q, q, q, out=ro)


def test_usm_arrays():
    """numpy views of USM shared memory (xejit.runtime.usm) in and out; the first core case's
    specialization (float32, D=64, causal)."""
    from xejit.runtime import usm
    q_np, k_np, v_np = _inputs("float32", "numpy", 2, 4, 2, 37, 45, 64)
    q, k, v = usm.asarray(q_np), usm.asarray(k_np), usm.asarray(v_np)
    out = usm.empty(q.shape, np.float32)
    out[...] = np.nan
    assert xejit.attention(q, k, v, causal=True, out=out) is out
    check(out, reference(q_np, k_np, v_np, True), "float32")
