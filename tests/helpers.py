"""Shared helpers of the compiler tests: random inputs, poisoned outputs, references, checks."""
from __future__ import annotations

import numpy as np

from xejit.codegen.abi import ARRAY_KINDS

TOL = {"f32": 1e-5, "bf16": 1e-2, "f16": 1e-2, "int": 0}


def rand(rng, shape, dtype, order="C"):
    """Random non-zero data of ``dtype`` ("f32", "f16", "bf16" (torch), "i8", "u8", "i32")."""
    if dtype in ("i8", "u8", "i32"):
        lo, hi = {"i8": (-8, 8), "u8": (1, 9), "i32": (-100, 100)}[dtype]
        x = rng.integers(lo, hi, size=shape)
        x[x == 0] = 1
        x = x.astype({"i8": np.int8, "u8": np.uint8, "i32": np.int32}[dtype])
    else:
        x = rng.uniform(0.5, 1.5, size=shape) * rng.choice([-1.0, 1.0], size=shape)
        x = x.astype(np.float16 if dtype == "f16" else np.float32)
    if order == "F":
        x = np.asfortranarray(x)
    if dtype == "bf16":
        import torch
        return torch.from_numpy(np.ascontiguousarray(x)).to(torch.bfloat16) if order == "C" else \
            torch.from_numpy(np.ascontiguousarray(x.T)).to(torch.bfloat16).T
    return x


def f64(x) -> np.ndarray:
    if type(x).__module__.startswith("torch"):
        return x.float().numpy().astype(np.float64)
    return np.asarray(x, dtype=np.float64)


def poisoned(shape, dtype):
    if dtype == "bf16":
        import torch
        return torch.full(shape, float("nan"), dtype=torch.bfloat16)
    if dtype in ("i32", "i8"):
        return np.full(shape, -12345 if dtype == "i32" else -77, {"i32": np.int32, "i8": np.int8}[dtype])
    return np.full(shape, np.nan, np.float16 if dtype == "f16" else np.float32)


def check(out, ref, kind: str, scale_by_max: bool = False) -> None:
    """fp: max |out - ref| / max(|ref|) (GEMMs) or elementwise relative error; ints exact."""
    got = f64(out)
    assert not np.isnan(got).any(), "unwritten (poisoned) elements remain"
    if kind == "int":
        np.testing.assert_array_equal(got, ref)
        return
    tol = TOL[kind]
    if scale_by_max:
        err = np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30)
    else:
        err = (np.abs(got - ref) / np.maximum(np.abs(ref), 1e-6)).max()
    assert err <= tol, f"relative error {err:.3g} > {tol}"


def use_mode(monkeypatch, mode: str) -> None:
    """Run the next launches in ``mode``: ``interpret`` (numpy), ``generic`` (the CPU device) or a
    GPU target's name (that code path, emulated on the CPU device)."""
    monkeypatch.delenv("XEJIT_INTERPRET", raising=False)
    monkeypatch.delenv("XEJIT_EMULATE", raising=False)
    if mode == "interpret":
        monkeypatch.setenv("XEJIT_INTERPRET", "1")
    elif mode != "generic":
        monkeypatch.setenv("XEJIT_EMULATE", mode)


def array_addresses(kernel, marshalled) -> list[int]:
    """The addresses of the array arguments of a marshalled launch (``xejit.runtime.launch._marshal``):
    a pointer argument is dpctl USM memory, an address argument (codegen/abi.py) an integer."""
    return [a._pointer if hasattr(a, "_pointer") else a.value
            for a, k in zip(marshalled.args, kernel.signature) if k in ARRAY_KINDS]
