"""The CPU device's explicit-SIMD kernels by name, and their SPIR-V.

These kernels are written as LLVM IR over ``<16 x float>`` values, one work-item per work-group,
instead of going through the tile lowering (lower_generic.py): the bf16 dot-product GEMMs and the
dot products of a column-major ``b`` (cpu_bf16_dot.py), and the decode GEMV (cpu_gemv.py). The
host side that launches them is xejit/cpu_simd_gemm.py.

Example:
    >>> kernel_args("gemv_rows_f32_1")
    13
"""
from __future__ import annotations

import functools

from llvmlite import ir

from . import cpu_bf16_dot as dot, cpu_gemv

#: the kernels by name
MODULES = {"dot_bf16_gemm": dot.gemm_module, "dot_bf16_gemm_rows": functools.partial(dot.gemm_module, packed=False),
           "dot_bf16_pack_b": dot.pack_b_module, "dot_bf16_probe": dot.probe_module,
           **{dot.bt_name(bf16, *blk): functools.partial(dot.gemm_bt_module, bf16, *blk)
              for bf16 in (True, False) for blk in ((dot.BT_MR, dot.BT_NT), dot.BT_SKINNY)},
           **{cpu_gemv.gemv_name(bf16, mr): functools.partial(cpu_gemv.gemv_module, bf16, mr)
              for bf16 in (True, False) for mr in cpu_gemv.ROWS}}


@functools.lru_cache(maxsize=None)
def _module(name: str) -> ir.Module:
    return MODULES[name]()


@functools.lru_cache(maxsize=None)
def spirv_module(name: str) -> bytes:
    """The SPIR-V of kernel ``name`` (emitted once per process: 10-110 ms), its imported
    dot-product function named as the intrinsic (cpu_bf16_dot.to_spirv)."""
    return dot.to_spirv(_module(name))


def kernel_args(name: str) -> int:
    """How many arguments kernel ``name`` takes."""
    return len(_module(name).get_global(name).args)
