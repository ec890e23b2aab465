"""``torch.ops.xejit.matmul``: xejit's GEMM as a torch custom op (torch.compile and autograd).

Importing this module registers the op (``xejit.matmul`` on tensors imports it, and
``import xejit`` does when torch is already imported). The op is functional:
``matmul(a, b, bias=None, activation=None) -> Tensor``. A fake (meta) implementation gives
torch.compile the result's shape and dtype without running the kernel; autograd is defined
for the float dtypes through more matmuls (the activation's derivative is taken at the
recomputed pre-activation).

Example:
    >>> import torch, xejit.torch_ops
    >>> a, b = torch.ones(2, 3), torch.ones(3, 4)
    >>> torch.ops.xejit.matmul(a, b, None, None).shape   # doctest: +SKIP
    torch.Size([2, 4])
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from .attention import backward, check_inputs, forward
from .errors import XejitError
from .matmul import _activation, _matmul, _result_shape_dtype

__all__ = ["matmul_op", "attention_op"]


def _matmul_impl(a, b, bias=None, activation=None):
    return _matmul(a, b, bias, activation, None)


@torch.library.custom_op("xejit::matmul", mutates_args=())
def matmul_op(a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor] = None,
              activation: Optional[str] = None) -> torch.Tensor:
    return _matmul_impl(a, b, bias, activation)


# XPU tensors: the same implementation under the XPU dispatch key (explicitly, beside the
# CompositeExplicitAutograd default); xejit.runtime.usm_array passes them to the kernel without
# copies and launches on torch's current xpu stream.
matmul_op.register_kernel("xpu")(_matmul_impl)


@matmul_op.register_fake
def _fake(a, b, bias=None, activation=None):
    _activation(activation, a)
    shape, dtype = _result_shape_dtype(a, b)
    return a.new_empty(shape, dtype=getattr(torch, dtype))


def _setup_context(ctx, inputs, output):
    a, b, bias, activation = inputs
    ctx.activation = activation
    ctx.save_for_backward(a, b, bias)


def _gelu_tanh_grad(z: torch.Tensor) -> torch.Tensor:
    c = math.sqrt(2.0 / math.pi)
    inner = c * (z + 0.044715 * z ** 3)
    t = torch.tanh(inner)
    return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * z * z)


def _backward(ctx, grad):
    a, b, bias = ctx.saved_tensors
    if not a.dtype.is_floating_point:
        raise XejitError(f"xejit.matmul: no gradient for {a.dtype} operands")
    if ctx.activation is not None:
        z = torch.ops.xejit.matmul(a, b, bias, None)
        if ctx.activation == "relu":
            grad = grad * (z > 0).to(grad.dtype)
        else:
            grad = (grad.float() * _gelu_tanh_grad(z.float())).to(grad.dtype)
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    g2 = grad
    if a.dim() == 1:
        g2 = g2.unsqueeze(-2 if b.dim() > 1 else -1)
    if b.dim() == 1:
        g2 = g2.unsqueeze(-1)
    grad_a = grad_b = grad_bias = None
    if ctx.needs_input_grad[0]:
        grad_a = torch.ops.xejit.matmul(g2, b2.mT, None, None)
        grad_a = _sum_to(grad_a, a2.shape).reshape(a.shape)
    if ctx.needs_input_grad[1]:
        grad_b = torch.ops.xejit.matmul(a2.mT, g2, None, None)
        grad_b = _sum_to(grad_b, b2.shape).reshape(b.shape)
    if bias is not None and ctx.needs_input_grad[2]:
        grad_bias = grad.reshape(-1, grad.shape[-1]).sum(0) if grad.dim() else grad
        grad_bias = grad_bias.reshape(bias.shape) if bias.numel() == grad_bias.numel() else grad_bias.sum().reshape(bias.shape)
    return grad_a, grad_b, grad_bias, None


def _sum_to(x: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Sum the broadcast batch dimensions of ``x`` away so that it has ``shape``."""
    while x.dim() > len(shape):
        x = x.sum(0)
    dims = [i for i, (s, t) in enumerate(zip(x.shape, shape)) if t == 1 and s != 1]
    return x.sum(dims, keepdim=True) if dims else x


matmul_op.register_autograd(_backward, setup_context=_setup_context)


# --- attention ----------------------------------------------------------------------------------

@torch.library.custom_op("xejit::attention", mutates_args=())
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                 scale: Optional[float] = None) -> torch.Tensor:
    """``torch.ops.xejit.attention(q, k, v, causal, scale)``: FlashAttention in the DSL
    (``xejit.attention``'s semantics: SDPA with top-left causal alignment and GQA)."""
    return forward(q, k, v, causal, scale)[0]


@attention_op.register_fake
def _attention_fake(q, k, v, causal=False, scale=None):
    check_inputs(q, k, v, scale)
    return q.new_empty(q.shape)


def _attention_setup(ctx, inputs, output):
    q, k, v, causal, scale = inputs
    ctx.causal, ctx.scale = causal, scale
    ctx.save_for_backward(q, k, v, output)


def _attention_backward(ctx, grad):
    q, k, v, out = ctx.saved_tensors
    dq, dk, dv = torch.ops.xejit.attention_backward(q, k, v, out, grad, ctx.causal, ctx.scale)
    return dq, dk, dv, None, None


@torch.library.custom_op("xejit::attention_backward", mutates_args=())
def attention_backward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                          grad: torch.Tensor, causal: bool = False,
                          scale: Optional[float] = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) by the DSL backward kernels (FlashAttention-2 recompute)."""
    return backward(q, k, v, out, grad, causal, scale)


@attention_backward_op.register_fake
def _attention_backward_fake(q, k, v, out, grad, causal=False, scale=None):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


attention_op.register_autograd(_attention_backward, setup_context=_attention_setup)
