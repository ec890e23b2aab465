"""Tiny SPIR-V modules that probe what a device's driver accepts (used by ``python -m xejit info``).

Each probe is one kernel using one feature; a device "has" the feature if its driver builds the
module. Properties a driver reports can be incomplete, so building is the ground truth.
"""
from __future__ import annotations

from llvmlite import ir

from . import builtins as bi
from .spirv import to_spirv

DPAS_BF16_M8 = "_Z45__spirv_SubgroupMatrixMultiplyAccumulateINTELiDv8_sDv8_iDv8_fi"
BLOCK2D_LOAD = "_Z32__spirv_Subgroup2DBlockLoadINTELiiiiPU3AS1KviiiDv2_iPv"


def _module(name: str, subgroup_size: int):
    m = bi.new_module(name)
    fn = bi.kernel(m, name, [bi.GLOBAL, bi.GLOBAL], subgroup_size=subgroup_size)
    return m, fn, ir.IRBuilder(fn.append_basic_block())


def subgroups(subgroup_size: int = 16) -> bytes:
    """cl_intel_subgroups: a block read and a shuffle."""
    m, fn, b = _module("probe_subgroups", subgroup_size)
    v = bi.block_read_u32(b, fn.args[0])
    w = bi.shuffle(b, v, bi.I32(0), kind="u32")
    b.store(w, b.gep(fn.args[1], [bi.global_id(b, 0)], source_etype=bi.I32))
    b.ret_void()
    return to_spirv(m, ["SPV_INTEL_subgroups"])


def dpas(subgroup_size: int = 16) -> bytes:
    """SPV_INTEL_subgroup_matrix_multiply_accumulate: one bf16 DPAS with M=8."""
    m, fn, b = _module("probe_dpas", subgroup_size)
    vi16, vi32, vf32 = ir.VectorType(bi.I16, 8), ir.VectorType(bi.I32, 8), ir.VectorType(bi.F32, 8)
    f = bi.declare(m, DPAS_BF16_M8, vf32, [bi.I32, vi16, vi32, vf32, bi.I32])
    a = b.load(fn.args[0], typ=vi16)
    bb = b.load(fn.args[0], typ=vi32)
    r = bi.call(b, f, [bi.I32(16), a, bb, ir.Constant(vf32, None), bi.I32(0x3000)])
    b.store(r, fn.args[1])
    b.ret_void()
    return to_spirv(m, ["SPV_INTEL_subgroup_matrix_multiply_accumulate"])


def block2d(subgroup_size: int = 16) -> bytes:
    """SPV_INTEL_2d_block_io: one 16-bit 8x16 block load."""
    m, fn, b = _module("probe_block2d", subgroup_size)
    v2 = ir.VectorType(bi.I32, 2)
    f = bi.declare(m, BLOCK2D_LOAD, bi.VOID, [bi.I32] * 4 + [bi.GLOBAL, bi.I32, bi.I32, bi.I32, v2, ir.PointerType()])
    dst = b.alloca(ir.VectorType(bi.I16, 8))
    bi.call(b, f, [bi.I32(2), bi.I32(16), bi.I32(8), bi.I32(1), fn.args[0], bi.I32(64), bi.I32(8), bi.I32(64),
                   ir.Constant(v2, [0, 0]), dst])
    b.store(b.load(dst, typ=ir.VectorType(bi.I16, 8)), fn.args[1])
    b.ret_void()
    return to_spirv(m, ["SPV_INTEL_2d_block_io"])


PROBES = {"cl_intel_subgroups": subgroups, "DPAS": dpas, "2D block IO": block2d}
