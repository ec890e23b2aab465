"""Hostile input to xejit.matmul: NaN through relu, K = 0 epilogues, out= aliasing an input,
out= of the wrong kind, torch's exception types for torch's mistakes, reversed strides.
Results against float64 references (tests/matmul/helpers.py), outputs poisoned."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import xejit
from xejit.errors import XejitError
from xejit.matmul import MatmulError
from tests.matmul.helpers import check, f64, poisoned, rand, reference

M, N, K = 37, 45, 29


def _gelu(z):
    return 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3)))


# --- NaN through the activation -----------------------------------------------------------------

@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_relu_keeps_nan_like_torch(lib):
    rng = np.random.default_rng(21)
    a, b = rand(rng, (M, K), "float32"), rand(rng, (K, N), "float32")
    a[3, 5] = np.nan                      # row 3 of the result is NaN
    bias = rand(rng, (N,), "float32")
    bias[7] = np.nan                      # column 7 too
    if lib == "torch":
        a, b, bias = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(bias)
    out = xejit.matmul(a, b, bias=bias, activation="relu")
    want = torch.relu(torch.from_numpy(f64(a) @ f64(b) + f64(bias)))   # torch's rule, in float64
    got = f64(out)
    nan = torch.isnan(want).numpy()
    assert nan[3].all() and nan[:, 7].all() and nan.sum() == M + N - 1
    np.testing.assert_array_equal(np.isnan(got), nan)
    ref = want.numpy()
    assert (ref[~nan] == 0).any() and (ref[~nan] > 0).any()
    np.testing.assert_allclose(got[~nan], ref[~nan], rtol=1e-5, atol=1e-5 * np.abs(ref[~nan]).max())


def test_relu_int8_stays_exact():
    """The int32 epilogue does not go through float (exact beyond 2**24)."""
    rng = np.random.default_rng(22)
    a = np.full((8, 1100), 127, np.int8)
    a[::2] *= -1
    b = rand(rng, (1100, 16), "int8")
    b[:, :8] = 127
    ref = np.maximum(a.astype(np.int64) @ b.astype(np.int64), 0)
    assert ref.max() > 2 ** 24
    check(xejit.matmul(a, b, activation="relu"), ref.astype(np.float64), "int32")


# --- K = 0 --------------------------------------------------------------------------------------

@pytest.mark.parametrize("activation", [None, "relu", "gelu_tanh"])
@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_zero_k_applies_the_activation_to_the_bias(activation, lib):
    rng = np.random.default_rng(23)
    a, b = rand(rng, (M, 0), "float32", lib), rand(rng, (0, N), "float32", lib)
    bias = rand(rng, (N,), "float32", lib)
    out = poisoned((M, N), "float32", lib)
    xejit.matmul(a, b, bias=bias, activation=activation, out=out)
    z = np.broadcast_to(f64(bias), (M, N))
    want = {None: z, "relu": np.maximum(z, 0), "gelu_tanh": _gelu(z)}[activation]
    assert activation is None or not np.allclose(want, z)   # the activation changes something
    check(out, want, "float32")


def test_zero_k_relu_keeps_nan():
    bias = np.array([np.nan, -1.5, 2.5], np.float32)
    out = xejit.matmul(np.ones((2, 0), np.float32), np.ones((0, 3), np.float32), bias=bias, activation="relu")
    assert np.isnan(out[:, 0]).all()
    np.testing.assert_array_equal(out[:, 1:], [[0.0, 2.5], [0.0, 2.5]])


# --- out= aliasing ------------------------------------------------------------------------------

def _usm(x):
    from xejit.runtime import usm
    return usm.asarray(x)


@pytest.mark.parametrize("case", ["a-b-out", "a-out", "b-out", "bias-out", "interleaved"])
def test_out_aliasing_an_input_is_correct(case):
    """USM arrays go to the kernel without a copy: an aliased out= is really shared memory."""
    rng = np.random.default_rng(24)
    n = 96                                                    # several workgroups and k-steps
    x = _usm(rand(rng, (n, n), "float32"))
    y = _usm(rand(rng, (n, n), "float32"))
    bias = None
    if case == "a-b-out":
        a, b, out = x, x, x
    elif case == "a-out":
        a, b, out = x, y, x
    elif case == "b-out":
        a, b, out = y, x, x
    elif case == "bias-out":
        a, b, out, bias = y, y, x, x[0]
    else:                                                     # out's rows interleave a's
        wide = _usm(rand(rng, (n, 2 * n), "float32"))
        a, b, out = wide[:, :n], y, wide[:, n:]
    want = reference(a, b, None if bias is None else np.array(bias))
    a_before = np.array(a)
    r = xejit.matmul(a, b, bias=bias, out=out)
    assert r is out
    check(out, want, "float32")
    if case == "interleaved":
        np.testing.assert_array_equal(a, a_before)          # the input half is untouched


def test_out_aliasing_torch():
    rng = np.random.default_rng(25)
    t = rand(rng, (64, 64), "float32", "torch")
    want = reference(t, t)
    xejit.matmul(t, t, out=t)
    check(t, want, "float32")


def test_out_with_repeated_elements_is_refused():
    a, b = np.ones((4, 3), np.float32), np.ones((3, 5), np.float32)
    base = np.zeros(5, np.float32)
    out = np.lib.stride_tricks.as_strided(base, (4, 5), (0, 4))      # writeable, rows share memory
    with pytest.raises(ValueError, match="share memory"):
        xejit.matmul(a, b, out=out)
    with pytest.raises(RuntimeError, match="share memory"):
        xejit.matmul(torch.ones(4, 3), torch.ones(3, 5), out=torch.zeros(5).expand(4, 5))
    with pytest.raises(ValueError, match="read-only"):
        xejit.matmul(a, b, out=np.broadcast_to(base, (4, 5)))


# --- out= of the wrong kind ---------------------------------------------------------------------

@pytest.mark.parametrize("out", [[0.0] * 20, (0.0,) * 20, "out", 3.0, torch.zeros(4, 5)])
def test_out_of_the_wrong_type_is_a_type_error(out):
    a, b = np.ones((4, 3), np.float32), np.ones((3, 5), np.float32)
    with pytest.raises(TypeError) as info:
        xejit.matmul(a, b, out=out)
    assert isinstance(info.value, XejitError) and "out (" in str(info.value)
    with pytest.raises(TypeError):
        xejit.matmul(torch.ones(4, 3), torch.ones(3, 5), out=np.zeros((4, 5), np.float32))


# --- torch's exception types ------------------------------------------------------------------

MISTAKES = [
    ((3, 4), (5, 6), torch.float32, torch.float32),     # K mismatch
    ((2, 3, 4), (3, 4, 5), torch.float32, torch.float32),   # batch dims that do not broadcast
    ((3, 4), (4, 5), torch.float32, torch.float16),     # mixed dtypes
    ((), (4, 5), torch.float32, torch.float32),         # a 0-d operand
    ((4,), (5,), torch.float32, torch.float32),         # 1-D lengths differ
]


@pytest.mark.parametrize("a_shape,b_shape,da,db", MISTAKES)
def test_mismatches_raise_what_torch_raises(a_shape, b_shape, da, db):
    ta, tb = torch.ones(a_shape, dtype=da), torch.ones(b_shape, dtype=db)
    with pytest.raises(RuntimeError):                    # torch's own behaviour for the mistake
        torch.matmul(ta, tb)
    for a, b in [(ta, tb), (ta.numpy(), tb.numpy())]:
        with pytest.raises(RuntimeError) as info:
            xejit.matmul(a, b)
        assert isinstance(info.value, MatmulError)
        assert isinstance(info.value, ValueError) and isinstance(info.value, XejitError)


def test_out_shape_and_bias_mistakes_are_runtime_errors():
    a, b = torch.ones(3, 4), torch.ones(4, 5)
    with pytest.raises(RuntimeError):
        torch.matmul(a, b, out=torch.empty(3, 5, dtype=torch.float16))
    with pytest.raises(RuntimeError):
        xejit.matmul(a, b, out=torch.empty(3, 5, dtype=torch.float16))
    with pytest.raises(RuntimeError):
        xejit.matmul(a, b, out=torch.empty(3, 4))
    with pytest.raises(RuntimeError):
        xejit.matmul(a, b, bias=torch.ones(4))


# --- reversed strides -------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["a-rows", "a-cols", "b-both", "batch", "out-rows", "bias"])
def test_negative_strides_are_copied(case):
    rng = np.random.default_rng(26)
    a, b = rand(rng, (M, K), "float32"), rand(rng, (K, N), "float32")
    bias, out = None, None
    if case == "a-rows":
        a = a[::-1]
    elif case == "a-cols":
        a = a[:, ::-1]
    elif case == "b-both":
        b = b[::-1, ::-1]
    elif case == "batch":
        a = rand(rng, (3, M, K), "float32")[::-1, ::-1]
    elif case == "out-rows":
        out = poisoned((M, N), "float32", "numpy")[::-1]
    else:
        bias = rand(rng, (N,), "float32")[::-1]
    want = reference(a, b, bias)
    r = xejit.matmul(a, b, bias=bias, out=out)
    check(r, want, "float32")
    if out is not None:
        assert r is out
