"""``xejit.attention``: FlashAttention over the DSL kernels of ``xejit.kernels.attention``.

Semantics of ``torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,
scale=scale, enable_gqa=True)``:

* ``q`` [B, H, Sq, D] or [H, Sq, D]; ``k`` and ``v`` [B, Hkv, Sk, D] (same rank and batch as
  ``q``); ``Hkv`` divides ``H`` (grouped-query attention: query head ``h`` reads key/value head
  ``h // (H // Hkv)``); ``Sq`` and ``Sk`` may differ (decode: ``Sq = 1``); ``D`` is any head dim
  (64, 128, 80, 96, ...; the kernel pads it to 16 columns, the padding reads zeros).
* ``causal=True`` masks key ``j > i`` for query ``i``: torch's top-left aligned lower triangle,
  also when ``Sq != Sk`` (``torch.ones(Sq, Sk).tril()``); ``Sk = 0`` gives zeros, as torch does.
* ``scale`` defaults to ``1 / sqrt(D)``.
* dtypes float16, bfloat16 (torch only) and float32; softmax and accumulation in fp32, the
  probabilities rounded to the input dtype for the second product; the result has the input dtype.
* torch tensors (CPU, or XPU where present), numpy arrays, numpy views of USM memory
  (``xejit.runtime.usm``); the result has the inputs' kind. ``out=`` takes the result.

Each (Sq, Sk, D, dtype, causal) is autotuned, the forward and both backward kernels, over
``xejit.kernels.attention.configs_for(target, kind, D)``; on Intel GPU targets the configs Intel's
compiler says spill are pruned first (as for GEMM). ``XEJIT_ATTENTION_TUNE=0`` skips the trials
(the first config that is left is taken).

Errors (all ``xejit.XejitError``): ``AttentionError`` (a ``ValueError`` and a ``RuntimeError``, as
torch raises) for shapes: wrong ranks, batch or head dims that differ, heads that do not divide,
k and v of different shapes, an ``out=`` of the wrong shape or dtype; ``XejitTypeError`` for
non-arrays, mixed kinds, unsupported or mixed dtypes, a non-number scale.

Example:
    >>> import numpy as np, xejit
    >>> q = k = v = np.ones((2, 4, 64), np.float32)
    >>> xejit.attention(q, k, v, causal=True).shape   # doctest: +SKIP
    (2, 4, 64)
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import options
from .autotuner import autotune, current_target
from .errors import XejitTypeError, XejitValueError
from .kernels import attention as ka
from .language import cdiv
from .matmul import _dtype_name, _empty_like_kind, _is_torch

__all__ = ["AttentionError", "attention", "attention_tuner"]

_SUPPORTED = ("float16", "bfloat16", "float32")
_TUNERS: dict[Any, Any] = {}


class AttentionError(XejitValueError, RuntimeError):
    """Shapes ``torch.nn.functional.scaled_dot_product_attention`` would reject (ranks, batch,
    head dims, heads that do not divide, a wrong ``out=``): a ``ValueError``, a ``RuntimeError``
    like torch's, and an ``XejitError``."""


def _describe(x: Any) -> str:
    return f"{_dtype_name(x)} {list(x.shape)}"


def head_pad(d: int) -> int:
    """The head dim the kernel works with: ``d`` rounded up to 16 (the DPAS K of 16-bit types)."""
    return -(-d // 16) * 16


def tune_limit() -> int | None:
    v = options.current().attention_tune or ""
    if v in ("", "all", "default"):
        return None
    try:
        return max(0, int(v))
    except ValueError:
        raise XejitValueError(f"XEJIT_ATTENTION_TUNE must be 'all' or a number of configs, got {v!r}") from None


def _prune(configs, named, **kwargs):
    """Query blocks far taller than the queries are dropped (decode, ``Sq = 1``, keeps the 1-row
    config where the target has one), 1-row blocks for longer queries too; then the first
    ``XEJIT_ATTENTION_TUNE`` configs are kept (all by default). Runs after Intel's compiler has
    dropped the configs that spill."""
    sq = int(named["Sq"])
    cap = 1 << max(sq - 1, 0).bit_length()
    smallest = min(c.kwargs["BM"] for c in configs)
    keep = [c for c in configs if c.kwargs["BM"] <= max(cap, smallest) and (c.kwargs["BM"] > 1 or sq <= 2)]
    keep = keep or [min(configs, key=lambda c: c.kwargs["BM"])]
    n = tune_limit()
    return keep if n is None else keep[:max(n, 1)]


def _prune_limit(configs, named, **kwargs):
    """The backward kernels: the first ``XEJIT_ATTENTION_TUNE`` configs (all by default)."""
    n = tune_limit()
    return list(configs) if n is None else list(configs)[:max(n, 1)]


def attention_tuner(target: str | None = None, kind: str = "fwd", D: int = 64):
    """The autotuned kernel ``kind`` ("fwd", "dq", "dkdv") for head dim ``D`` on ``target``
    (default: the current device's): the candidates of ``xejit.kernels.attention.configs_for``,
    those Intel's compiler says spill pruned on GPU targets (as for GEMM), the rest timed."""
    target = target or current_target()
    limit = tune_limit()
    configs = ka.configs_for(target, kind, D)
    key = (target, limit, kind, tuple(c._identity() for c in configs))
    tuner = _TUNERS.get(key)
    if tuner is None:
        opts = options.current()
        warmup, rep = opts.attention_tune_warmup_ms, opts.attention_tune_rep_ms
        kernel = {"fwd": ka.attn_fwd_kernel, "dq": ka.attn_bwd_dq_kernel, "dkdv": ka.attn_bwd_dkdv_kernel}[kind]
        tuner = autotune(configs, key=["Sq", "Sk"], warmup=warmup, rep=rep,
                         prune_configs_by={"early_config_prune": _prune if kind == "fwd" else _prune_limit},
                         restore_value=["o", "lse"] if kind == "fwd" else None)(kernel)
        _TUNERS[key] = tuner
    return tuner


# --- checks -------------------------------------------------------------------------------------

def _as_array(x: Any, name: str) -> Any:
    if _is_torch(x) or isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__array_interface__") or hasattr(x, "__sycl_usm_array_interface__"):
        return np.asarray(x)
    raise XejitTypeError(f"xejit.attention: {name} of type {type(x).__name__} is not an array "
                         f"(expected a torch tensor, a numpy array or a USM array)")


def check_inputs(q: Any, k: Any, v: Any, scale: Any = None) -> tuple[int, int, int, int, int, int, str]:
    """(B, H, Hkv, Sq, Sk, D, dtype) of valid inputs; raises the documented errors otherwise."""
    kinds = {_is_torch(x) for x in (q, k, v)}
    if len(kinds) > 1:
        raise XejitTypeError(f"xejit.attention: q ({type(q).__name__}), k ({type(k).__name__}) and v "
                             f"({type(v).__name__}) must all be torch tensors or all arrays")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if _dtype_name(x) not in _SUPPORTED:
            raise XejitTypeError(f"xejit.attention: {name} ({_describe(x)}) has an unsupported dtype; "
                                 f"supported: {', '.join(_SUPPORTED)}")
    if not (_dtype_name(q) == _dtype_name(k) == _dtype_name(v)):
        raise XejitTypeError(f"xejit.attention: q ({_describe(q)}), k ({_describe(k)}) and v "
                             f"({_describe(v)}) must have the same dtype")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating))):
        raise XejitTypeError(f"xejit.attention: scale must be a number or None, got {type(scale).__name__}")
    if q.ndim not in (3, 4) or k.ndim != q.ndim or v.ndim != q.ndim:
        raise AttentionError(f"xejit.attention: q ({_describe(q)}), k ({_describe(k)}) and v ({_describe(v)}) "
                             f"must all be [B, H, S, D] or all [H, S, D]")
    if tuple(k.shape) != tuple(v.shape):
        raise AttentionError(f"xejit.attention: k ({_describe(k)}) and v ({_describe(v)}) must have the same shape")
    qs = (1,) * (4 - q.ndim) + tuple(q.shape)
    ks = (1,) * (4 - k.ndim) + tuple(k.shape)
    B, H, Sq, D = qs
    Bk, Hkv, Sk, Dk = ks
    if Bk != B:
        raise AttentionError(f"xejit.attention: q ({_describe(q)}) and k ({_describe(k)}) have different "
                             f"batch sizes")
    if Dk != D:
        raise AttentionError(f"xejit.attention: the head dims differ: q ({_describe(q)}) has {D}, k and v "
                             f"({_describe(k)}) have {Dk}")
    if D == 0:
        raise AttentionError(f"xejit.attention: the head dim of q ({_describe(q)}) is 0")
    if Hkv == 0 or H % Hkv:
        raise AttentionError(f"xejit.attention: the key/value heads ({Hkv}, k {_describe(k)}) must divide "
                             f"the query heads ({H}, q {_describe(q)})")
    return B, H, Hkv, Sq, Sk, D, _dtype_name(q)


def _check_out(out: Any, q: Any, shape: tuple[int, ...], dtype: str) -> None:
    if _is_torch(out) != _is_torch(q) or not (_is_torch(out) or isinstance(out, np.ndarray)):
        raise XejitTypeError(f"xejit.attention: out ({type(out).__name__}) must be an array of the same "
                             f"kind as q ({type(q).__name__})")
    if tuple(out.shape) != shape or _dtype_name(out) != dtype:
        raise AttentionError(f"xejit.attention: out ({_describe(out)}) must be {dtype} {list(shape)}")
    if not _is_torch(out) and not out.flags.writeable:
        raise XejitValueError(f"xejit.attention: out ({_describe(out)}) is read-only")


# --- the launch ---------------------------------------------------------------------------------

def _rows(x: Any, dims: tuple[int, int, int, int]) -> Any:
    """x as a row-major [B*H*S, D] array (a view when x is contiguous, else a copy)."""
    B, H, S, D = dims
    if _is_torch(x):
        return x.reshape(B * H * S, D).contiguous()
    return np.ascontiguousarray(x.reshape(B * H * S, D))


def _transposed(x: Any) -> Any:
    return x.T if not _is_torch(x) else x.t()


def forward(q: Any, k: Any, v: Any, causal: bool, scale: float | None,
            want_lse: bool = False) -> tuple[Any, Any]:
    """(out [.., Sq, D] contiguous, lse or None) for checked inputs; lse (when ``want_lse``) is the
    kernel's [Sq, >= B*H] float32 buffer of row log-sum-exps in log2 units, a column per head."""
    B, H, Hkv, Sq, Sk, D, dtype = check_inputs(q, k, v, scale)
    shape = tuple(q.shape)
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    if Sq == 0 or B * H == 0 or Sk == 0:
        out = _empty_like_kind(q, shape, dtype)
        if _is_torch(out):
            out.zero_()
        else:
            out[...] = 0
        return out, None
    BD = head_pad(D)
    q2 = _rows(q, (B, H, Sq, D))
    k2 = _rows(k, (B, Hkv, Sk, D))
    v2 = _rows(v, (B, Hkv, Sk, D))
    o2 = _empty_like_kind(q, (Sq, B * H * BD), dtype)
    lse2 = _empty_like_kind(q, (Sq, -(-(B * H) // 4) * 4), "float32")   # 16-byte pitch
    # the log-sum-exp is always stored (Sq floats a head): the forward and the backward's
    # recompute are then one kernel, one build
    tuner = attention_tuner(kind="fwd", D=D)
    tuner[lambda meta: (cdiv(Sq, meta["BM"]), B * H)](
        q2, _transposed(k2), v2, o2, lse2, Sq, Sk, H, H // Hkv, scale * 1.4426950408889634,
        BD=BD, CAUSAL=bool(causal), STORE_LSE=True, TRIM=Sq <= Sk)
    o4 = o2.reshape(Sq, B, H, BD)[..., :D]
    o4 = o4.permute(1, 2, 0, 3) if _is_torch(o4) else o4.transpose(1, 2, 0, 3)
    out = _empty_like_kind(q, shape, dtype)
    out[...] = o4 if len(shape) == 4 else o4[0]
    return out, (lse2 if want_lse else None)


def attention(q: Any, k: Any, v: Any, *, causal: bool = False, scale: float | None = None,
              out: Any = None) -> Any:
    """``softmax(q @ k^T * scale [+ causal mask]) @ v``; see the module docstring.

    Raises:
        AttentionError: wrong ranks, different batch sizes or head dims, key/value heads that do not
            divide the query heads, k and v of different shapes, a wrong ``out=``; also a
            ``ValueError`` and a ``RuntimeError``.
        XejitTypeError: a non-array, mixed torch and numpy inputs, unsupported or mixed dtypes,
            an ``out=`` of another kind, a scale that is not a number.
    """
    q, k, v = _as_array(q, "q"), _as_array(k, "k"), _as_array(v, "v")
    dtype = check_inputs(q, k, v, scale)[-1]
    if not isinstance(causal, (bool, np.bool_)):
        raise XejitTypeError(f"xejit.attention: causal must be a bool, got {type(causal).__name__}")
    if _is_torch(q):
        import torch
        grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
        if out is not None and grad:
            raise AttentionError("xejit.attention: out= does not support autograd; call it without out= "
                                 "or under torch.no_grad()")
        if out is None:
            # importing torch_ops registers torch.ops.xejit.attention on first use
            from .torch_ops import attention_op
            return attention_op(q, k, v, bool(causal), None if scale is None else float(scale))
    if out is not None:
        _check_out(out, q, tuple(q.shape), dtype)
    res, _ = forward(q, k, v, bool(causal), scale)
    if out is None:
        return res
    out[...] = res
    return out


# --- backward -----------------------------------------------------------------------------------

def backward(q: Any, k: Any, v: Any, out: Any, dout: Any, causal: bool, scale: float | None):
    """(dq, dk, dv) of ``attention(q, k, v)`` for torch tensors: FlashAttention-2's scheme, P
    recomputed from the row log-sum-exp (one more forward launch, which stores it), delta =
    rowsum(dO * O) in torch, then the dq kernel (a program per query block) and the dk/dv kernel
    (a program per key block, summing the G query heads of a key/value head)."""
    import torch
    B, H, Hkv, Sq, Sk, D, _ = check_inputs(q, k, v, scale)
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    if Sq == 0 or Sk == 0 or B * H == 0:
        return dq, dk, dv
    _, lse_c = forward(q, k, v, causal, scale, want_lse=True)
    BD = head_pad(D)
    BHp = lse_c.shape[1]
    dout = dout.to(q.dtype)
    delta = (dout.float() * out.float()).sum(-1).reshape(B * H, Sq)
    delta_c = torch.zeros((Sq, BHp), dtype=torch.float32, device=q.device)
    delta_c[:, :B * H] = delta.t()
    lse_r = lse_c[:, :B * H].t().contiguous()
    delta_r = delta.contiguous()
    q2, do2 = _rows(q, (B, H, Sq, D)), _rows(dout, (B, H, Sq, D))
    k2, v2 = _rows(k, (B, Hkv, Sk, D)), _rows(v, (B, Hkv, Sk, D))
    dq2 = torch.empty((Sq, B * H * BD), dtype=q.dtype, device=q.device)
    dk2 = torch.empty((Sk, B * Hkv * BD), dtype=q.dtype, device=q.device)
    dv2 = torch.empty((Sk, B * Hkv * BD), dtype=q.dtype, device=q.device)
    qk_scale = scale * 1.4426950408889634
    attention_tuner(kind="dq", D=D)[lambda meta: (cdiv(Sq, meta["BM"]), B * H)](
        q2, k2.t(), k2, v2.t(), do2, lse_c, delta_c, dq2, Sq, Sk, H, H // Hkv, qk_scale, scale,
        BD=BD, CAUSAL=bool(causal), TRIM=Sq <= Sk)
    attention_tuner(kind="dkdv", D=D)[lambda meta: (cdiv(Sk, meta["BN"]), B * Hkv)](
        q2, q2.t(), k2, v2, do2, do2.t(), lse_r, delta_r, dk2, dv2, Sq, Sk, H, H // Hkv, qk_scale, scale,
        BD=BD, CAUSAL=bool(causal))

    def back(x2, S, heads, like):
        x4 = x2.reshape(S, B, heads, BD)[..., :D].permute(1, 2, 0, 3)
        return x4.reshape(like.shape).contiguous() if like.dim() == 4 else x4[0].contiguous()
    return back(dq2, Sq, H, q), back(dk2, Sk, Hkv, k), back(dv2, Sk, Hkv, v)
