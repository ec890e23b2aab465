"""torch.ops.xejit.matmul: the custom op, its fake implementation, torch.compile and autograd."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import xejit
import xejit.torch_ops  # noqa: F401  (registers the op)
from tests.matmul.backend import heavy_on_device
from tests.matmul.helpers import check, f64, rand, reference


def test_op_is_registered_and_matches():
    rng = np.random.default_rng(0)
    a, b = rand(rng, (2, 20, 12), "bfloat16", "torch"), rand(rng, (12, 18), "bfloat16", "torch")
    r = torch.ops.xejit.matmul(a, b, None, None)
    assert r.dtype == torch.bfloat16 and r.shape == (2, 20, 18)
    check(r, reference(a, b), "bfloat16")


def test_fake_impl_gives_shape_and_dtype():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        a = torch.empty(4, 1, 8, 16, dtype=torch.int8)
        b = torch.empty(3, 16, 5, dtype=torch.int8)
        r = torch.ops.xejit.matmul(a, b, None, None)
    assert r.shape == (4, 3, 8, 5) and r.dtype == torch.int32


def test_opcheck():
    rng = np.random.default_rng(1)
    a, b = rand(rng, (9, 7), "float32", "torch"), rand(rng, (7, 5), "float32", "torch")
    bias = rand(rng, (5,), "float32", "torch")
    torch.library.opcheck(torch.ops.xejit.matmul.default, (a, b, bias, "relu"),
                          test_utils=("test_schema", "test_faketensor"))


@pytest.mark.parametrize("backend,epilogue", [
    heavy_on_device(be, ep, core=not ep) for be in ("eager", "aot_eager") for ep in (False, True)])
def test_torch_compile(backend, epilogue):
    rng = np.random.default_rng(2)
    act = "gelu_tanh" if epilogue else None
    x, w = rand(rng, (3, 10, 16), "float32", "torch"), rand(rng, (16, 12), "float32", "torch")
    bias = rand(rng, (12,), "float32", "torch") if epilogue else None

    def f(x, w, bias):
        return xejit.matmul(x, w, bias=bias, activation=act) * 2.0

    compiled = torch.compile(f, backend=backend, fullgraph=True)
    check(compiled(x, w, bias), 2.0 * reference(x, w, bias, act), "float32")


GRAD_CASES = [
    heavy_on_device((13, 9), (9, 11), False, None, core=True),
    heavy_on_device((2, 13, 9), (9, 11), True, "relu"),
    heavy_on_device((2, 1, 5, 9), (3, 9, 4), True, "gelu_tanh"),
    heavy_on_device((9,), (9, 11), False, None),
    heavy_on_device((13, 9), (9,), False, None),
    heavy_on_device((9,), (2, 9, 4), True, None),
]


@pytest.mark.parametrize("a_shape,b_shape,with_bias,activation", GRAD_CASES)
def test_autograd_matches_torch(a_shape, b_shape, with_bias, activation):
    rng = np.random.default_rng(len(a_shape) + 3 * len(b_shape))
    a = rand(rng, a_shape, "float32", "torch").requires_grad_()
    b = rand(rng, b_shape, "float32", "torch").requires_grad_()
    n = 1 if len(b_shape) == 1 else b_shape[-1]
    bias = rand(rng, (n,), "float32", "torch").requires_grad_() if with_bias else None
    ours = xejit.matmul(a, b, bias=bias, activation=activation)
    ref = torch.matmul(a, b)
    if bias is not None:
        ref = ref + bias
    if activation == "relu":
        ref = torch.relu(ref)
    elif activation == "gelu_tanh":
        ref = torch.nn.functional.gelu(ref, approximate="tanh")
    grad = torch.from_numpy(rng.standard_normal(tuple(ref.shape)).astype(np.float32) + 0.1)
    got = torch.autograd.grad(ours, [t for t in (a, b, bias) if t is not None], grad)
    want = torch.autograd.grad(ref, [t for t in (a, b, bias) if t is not None], grad)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        check(g, f64(w), "float32") if np.abs(f64(w)).max() > 0 else None
        assert np.abs(f64(g) - f64(w)).max() <= 1e-4 * (np.abs(f64(w)).max() + 1)


def test_out_with_autograd_is_an_error():
    a = torch.ones(3, 4, requires_grad=True)
    with pytest.raises(xejit.XejitError, match="out= does not support autograd"):
        xejit.matmul(a, torch.ones(4, 5), out=torch.empty(3, 5))


@pytest.mark.parametrize("case", [heavy_on_device("int8 torch tensors")])
def test_int8_has_no_gradient_but_runs(case):
    a = torch.ones(3, 4, dtype=torch.int8)
    r = xejit.matmul(a, torch.ones(4, 5, dtype=torch.int8))
    assert r.dtype == torch.int32 and (r == 4).all()
