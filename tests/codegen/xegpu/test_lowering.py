"""XeGPU -> LLVM -> SPIR-V: every module passes spirv-val for pvc, bmg, lnl, dg2 (real builtins and
emulated), and the code has the structure the tile arithmetic predicts."""
from __future__ import annotations

import re

import pytest

from xejit.codegen import lower_xegpu
from xejit.codegen.compiler import compile_kernel
from xejit.codegen.spirv import disassemble

from .helpers import emit, gemm_case, lower_pipelined
from .kernels import gemm

CASES = [("bf16", False), ("f16", True), ("i8", False), ("f32", False), ("bf16", True)]


# dg2 has no tf32 DPAS: its f32 GEMM is the FMA fallback, tested below.
REAL_CASES = [(t, d, c) for t in ("pvc", "bmg", "lnl", "dg2") for d, c in CASES if not (t == "dg2" and d == "f32")]
# lnl's block IO and DPAS are bmg's (Intel's compiler builds the same ISA for both): one lnl case
# in the default run, the rest with the slow tests. Also slow (each an Intel compiler build): bf16
# column-major B off pvc (f16's transposed 16-bit loads with another DPAS type: the f16-colB cases),
# bmg's i8 and f32 (pvc's DPAS; bmg's block IO: its bf16 and f16-colB cases).
SLOW_REAL = {("lnl", "f16", True), ("lnl", "i8", False), ("lnl", "f32", False), ("lnl", "bf16", True),
             ("bmg", "bf16", True), ("dg2", "bf16", True), ("bmg", "i8", False), ("bmg", "f32", False)}
REAL_PARAMS = [pytest.param(t, d, c, marks=[pytest.mark.slow] if (t, d, c) in SLOW_REAL else [],
                            id=f"{t}-{d}{'-colB' if c else ''}") for t, d, c in REAL_CASES]


@pytest.mark.parametrize("target,dtype,b_col", REAL_PARAMS)
def test_spirv_val_real_builtins(target, dtype, b_col):
    case = gemm_case(gemm, dtype, 64, 64, 64, 32, 64, 32, b_colmajor=b_col)
    ck = compile_kernel(case["fn"], target)               # the whole path, spirv-val'd
    asm = ck.asm["spvasm"]
    assert "OpSubgroupMatrixMultiplyAccumulateINTEL" in asm
    if target == "dg2":
        assert "Subgroup2DBlock" not in asm
    else:   # loads of more than 16 values per lane and stores: Khronos; prefetches: IGC's payloads
        assert "OpSubgroup2DBlockLoad" in asm and "OpSubgroup2DBlockStoreINTEL" in asm
        assert "__builtin_IB_subgroup_createBlock2DAddressPayload" in asm
        assert "__builtin_IB_subgroup_block_read_ap_prefetch_" in asm


def test_f32_without_a_dpas_is_a_reported_fma_fallback(monkeypatch):
    case = gemm_case(gemm, "f32", 16, 16, 16, 8, 16, 8)      # tf32 requested; dg2 has none
    res = lower_xegpu.lower(case["fn"], "dg2", {"emulate": False})
    assert any("no tf32 DPAS" in f for f in res["fallbacks"])
    assert res["instructions"]["fma multiply-accumulate (no DPAS)"] > 0 and "dpas" not in res["instructions"]
    emit(res["module"], res["extensions"])
    monkeypatch.setenv("XEJIT_STRICT", "1")
    from xejit.codegen.passes.common import CompilerError
    with pytest.raises(CompilerError, match="XEJIT_STRICT"):
        lower_xegpu.lower(case["fn"], "dg2", {"emulate": False})


@pytest.mark.parametrize("target", ["pvc", "dg2"])
def test_emulated_modules_validate_with_cpu_extensions_only(target):
    case = gemm_case(gemm, "bf16", 40, 72, 80, 32, 64, 32)
    res = lower_xegpu.lower(case["fn"], target, {"emulate": True})
    asm = disassemble(emit(res["module"], res["extensions"]))
    assert "SubgroupMatrixMultiplyAccumulate" not in asm and "Subgroup2DBlock" not in asm
    assert "OpCapability SubgroupShuffleINTEL" in asm


def test_pvc_gemm_k_loop_holds_only_block_loads_prefetches_and_dpas():
    case = gemm_case(gemm, "bf16", 256, 256, 256, 32, 64, 32)
    res = lower_pipelined(case["fn"], "pvc", emulate=False)
    x = res["xegpu_fn"]
    loop = next(op for op in x.walk() if op.name == "scf.for")
    kinds = {op.name for op in loop.regions[0].block.ops}
    # register moves (slices of load blocks) and constant offsets are not memory instructions
    assert kinds <= {"xegpu.load_nd", "xegpu.prefetch_nd", "xegpu.dpas", "xegpu.update_nd_offset",
                     "vector.extract_strided_slice", "arith.constant", "scf.yield"}, kinds
    ops = loop.regions[0].block.ops
    assert sum(op.name == "xegpu.dpas" for op in ops) == (32 // 8) * (64 // 16) * (32 // 16)
    assert sum(op.name == "xegpu.load_nd" for op in ops) == 3         # A (2 blocks) + B (2 x 2 blocks)
    assert sum(op.name == "xegpu.prefetch_nd" for op in ops) == 3
    assert res["fallbacks"] == []
    # LLVM IR: the k-loop is versioned on the (hoisted) surface checks; the fast version's body
    # is one basic block of 2D block loads / prefetches and DPAS (calls of the instruction
    # wrappers, inlined later), without a global load or store
    llir = str(res["module"])
    blocks = dict(re.findall(r'^"?(for\.body[.\d]*)"?:\n(.*?)(?=^\S)', llir, re.S | re.M))
    fast, slow = blocks["for.body"], blocks["for.body.1"]
    assert len(re.findall(r'call .*@"__xejit_dpas_sg16_bf16_bf16_f32_m8"', fast)) == 32
    assert len(re.findall(r'call .*@"__xejit_2d_load_transform_sg16_e16_w16_h32_c2"', fast)) == 2
    assert len(re.findall(r'call .*@"__xejit_2d_load_sg16_e16_w16_h32_c2"', fast)) == 1
    # prefetches through IGC's address payloads, made before the loop with the coordinate the
    # k-loop does not move set there: in the loop each sets the one it moves, then reads
    assert len(re.findall(r'call .*@"__builtin_IB_subgroup_block_read_ap_prefetch_', fast)) == 3
    assert len(re.findall(r'call .*@"__builtin_IB_subgroup_setBlock2DAddressPayloadBlock[XY]"', fast)) == 3
    assert len(re.findall(r'call .*@"__builtin_IB_subgroup_setBlock2DAddressPayloadBlock[XY]"', llir)) >= 6
    assert "createBlock2DAddressPayload" not in fast
    assert "addrspace(1)*" not in fast and not re.search(r"load [^,]*, ptr addrspace\(1\)", fast)
    assert "__xejit_2d_" not in slow and "__builtin_IB_" not in slow
    asm = disassemble(emit(res["module"], res["extensions"]))
    for inst in ("OpSubgroupMatrixMultiplyAccumulateINTEL", "OpSubgroup2DBlockLoadTransformINTEL",
                 "OpSubgroup2DBlockLoadINTEL", "__builtin_IB_subgroup_block_read_ap_prefetch_"):
        assert inst in asm
    assert res["instructions"]["dpas"] == 32


def test_report_counts_instructions_and_names_fallbacks():
    case = gemm_case(gemm, "i8", 24, 48, 70, 16, 32, 64)   # A: pitch 70 B; B: 48 B
    res = lower_xegpu.lower(case["fn"], "pvc", {"emulate": False})
    assert res["instructions"]["gather load (per-lane)"] > 0
    assert len(res["fallbacks"]) == 1 and "xetile.load_tile" in res["fallbacks"][0]
    assert res["report"]["dpas"] == (16 // 8) * (32 // 16) * (64 // 32)
