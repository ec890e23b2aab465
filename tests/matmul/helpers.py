"""Inputs, references and tolerances for the matmul tests (DESIGN.md "How correctness is established")."""
from __future__ import annotations

import sys

import numpy as np
import torch

RTOL = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}
TORCH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
         "int8": torch.int8, "int32": torch.int32}


def rand(rng: np.random.Generator, shape, dtype: str, lib: str = "numpy"):
    """Random non-zero values (ints: +-1..+-127), as numpy (bfloat16: ml_dtypes') or torch."""
    if dtype == "int8":
        x = rng.integers(1, 128, shape) * rng.choice([-1, 1], shape)
        x = x.astype(np.int8)
    else:
        x = rng.standard_normal(shape) + 0.1
        x[x == 0] = 0.5
    if lib == "torch":
        return torch.from_numpy(np.asarray(x)).to(TORCH[dtype])
    return np.asarray(x).astype(_numpy_dtype(dtype))


def _numpy_dtype(dtype: str):
    """numpy's dtype of a name (bfloat16: ml_dtypes', which numpy does not know by name)."""
    if dtype == "bfloat16":
        import ml_dtypes
        return ml_dtypes.bfloat16
    return dtype


def f64(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().double().numpy()
    return np.asarray(x, dtype=np.float64)


def poisoned(shape, dtype: str, lib: str):
    if lib == "torch":
        t = torch.empty(shape, dtype=TORCH[dtype])
        return t.fill_(-12345 if dtype == "int32" else float("nan"))
    return np.full(shape, -12345 if dtype == "int32" else np.nan, _numpy_dtype(dtype))


def check(out, ref: np.ndarray, dtype: str) -> None:
    """``out`` equals the float64 reference: exactly for ints, within the dtype's relative bound."""
    got = f64(out)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    if dtype in ("int8", "int32"):
        np.testing.assert_array_equal(got, ref)
        return
    assert np.isfinite(got).all(), "unwritten (poisoned) or non-finite elements in the result"
    scale = np.abs(ref).max() if ref.size else 1.0
    err = np.abs(got - ref).max() / max(scale, 1e-30) if ref.size else 0.0
    assert err <= RTOL[dtype], f"relative error {err:.3g} > {RTOL[dtype]}"


def reference(a, b, bias=None, activation=None) -> np.ndarray:
    r = np.matmul(f64(a), f64(b))
    if bias is not None:
        r = r + f64(bias)
    if activation == "relu":
        r = np.maximum(r, 0)
    elif activation == "gelu_tanh":
        r = 0.5 * r * (1 + np.tanh(np.sqrt(2 / np.pi) * (r + 0.044715 * r ** 3)))
    return r


def spy_gemv_calls(monkeypatch, *names: str) -> list:
    """The (M, N, K) of every call of ``xejit.matmul.<name>`` for each of ``names`` (skinny-GEMM
    entries taking a, b first) that did its work (returned something other than False: a replay
    that does not apply returns False), recorded while the real function runs."""
    xm = sys.modules["xejit.matmul"]   # (xejit.matmul is also the function)
    seen = []

    def spy_of(real):
        def spy(a, b, *rest):
            got = real(a, b, *rest)
            if got is not False:
                seen.append((a.shape[0], b.shape[1], a.shape[1]))
            return got
        return spy
    for name in names:
        monkeypatch.setattr(xm, name, spy_of(getattr(xm, name)))
    return seen
