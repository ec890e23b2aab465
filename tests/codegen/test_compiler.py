"""compile_kernel: stages, report, ABI, dumps, errors (no device launches here)."""
from __future__ import annotations

import os

import numpy as np
import pytest

import xejit
import xejit.language as xl
from xejit.codegen import emulation
from xejit.codegen.compiler import CompilerError, compile_kernel
from xejit.codegen.spirv import validate
from xejit.device_launch import cache_key, expand_args
from xejit.runtime import _icd

from ..kernels import matmul, matmul_bias_relu, matmul_splitk, rowsum_convert, rowsum_layout, softmax

X = np.zeros((16, 16), np.float32)


def _gemm_ir(**kw):
    kw = {"BM": 8, "BN": 16, "BK": 16, **kw}
    return matmul.compile_ir(X, X, X, 16, 16, 16, **kw)


def test_stages_signature_and_report():
    ck = compile_kernel(_gemm_ir(), "generic")
    for key in ("xetile", "xetile-sg", "llir", "spvasm", "spv"):
        assert key in ck.asm
    assert "xegpu" not in ck.asm
    assert "gpu.subgroup_id" not in ck.asm["xetile-sg"]          # one subgroup: no ids needed
    assert "OpSubgroupBlockReadINTEL" in ck.asm["spvasm"]
    assert "llvm.fma" in ck.asm["llir"] or "fma" in ck.asm["spvasm"]
    validate(ck.spv)
    assert ck.signature == ("ptr_in",) + ("i64",) * 4 + ("ptr_in",) + ("i64",) * 4 + ("ptr",) + ("i64",) * 7
    assert ck.arg_plan[:5] == [(0, "ptr_in", "ptr"), (0, "i64", "shape0"), (0, "i64", "shape1"),
                               (0, "i64", "stride0"), (0, "i64", "stride1")]
    assert ck.workgroup_size == (16, 1, 1)
    assert {"layout", "wg_to_sg", "cleanup", "lower", "llvm-opt", "spirv", "spirv-val"} <= set(ck.timings)
    text = ck.report()
    assert "fma" in text and "block_read_u32" in text and "registers:" in text


def test_multi_subgroup_ids_and_workgroup_size():
    ck = compile_kernel(_gemm_ir(BM=32, BN=32, num_subgroups=4), "generic")
    assert "gpu.subgroup_id" in ck.asm["xetile-sg"]
    assert ck.workgroup_size == (64, 1, 1) and ck.block(2) == (64, 1)


def test_fallbacks_are_reported():
    # column-major f16: no subgroup block reads (row-major f16 tiles have 16-bit ones)
    a16 = np.asfortranarray(np.zeros((16, 16), np.float16))
    ck = compile_kernel(matmul.compile_ir(a16, a16, a16, 16, 16, 16, BM=8, BN=16, BK=16), "generic")
    assert any("plain" in f and "f16" in f for f in ck.fallbacks), ck.fallbacks


def test_dump_writes_every_stage(tmp_path, monkeypatch):
    monkeypatch.setenv("XEJIT_DUMP", str(tmp_path))
    compile_kernel(_gemm_ir(), "generic")
    names = {p.name for p in tmp_path.iterdir()}
    for stage in ("xetile", "xetile-sg", "llir", "spv", "spvasm"):
        assert f"matmul.{stage}" in names


def test_reduce_split_over_subgroups_compiles():
    # was a verifier error: the split reduce is now a cross-subgroup reduction (through SLM)
    ir = rowsum_layout.compile_ir(X, X, BM=8, BN=64, SGL=[1, 4], SGD=[8, 16], num_subgroups=4)
    compile_kernel(ir, "generic")


def test_convert_layout_to_another_distribution_compiles():
    ir = rowsum_convert.compile_ir(X, X, BM=8, BN=64, SGL=[1, 4], SGD=[8, 16], SGL2=[4, 1], SGD2=[2, 64],
                                   num_subgroups=4)
    assert "SLM load" in compile_kernel(ir, "generic").report()


@xejit.kernel
def _mask_convert(x, y, SGL: xl.constexpr, SGD: xl.constexpr):
    t = xl.load_tile(xl.init_tile(x, [0, 0], [16, 32], wg_map=xl.wg_map([1, 4], [16, 8])))
    keep = xl.convert_layout(t > 0.0, xl.wg_map(SGL, SGD))
    xl.store_tile(xl.init_tile(y, [0, 0], [16, 32]), xl.where(keep, 1.0, 0.0))


def test_unsupported_case_names_op_and_line():
    x = np.zeros((16, 32), np.float32)
    ir = _mask_convert.compile_ir(x, x, SGL=[4, 1], SGD=[4, 32], num_subgroups=4)
    with pytest.raises(CompilerError, match=r"test_compiler\.py:\d+:\d+: error: xetile\.convert_layout: .*i1") as info:
        compile_kernel(ir, "generic")
    assert "xl.convert_layout(t > 0.0" in str(info.value) and str(info.value).endswith("^")


def test_dpas_target_goes_through_the_xegpu_hook():
    ir = _gemm_ir(BM=16, BN=16)
    try:
        ck = compile_kernel(ir, "pvc", emulate=True)
    except CompilerError as e:   # the XeGPU path may reject this kernel, but must say why
        assert "lower_xegpu" in str(e) or "pvc" in str(e) or "tf32" in str(e)
    else:
        assert ck.path == "xegpu" and "xegpu" in ck.asm


def test_abi_expansion_and_cache_key():
    ck = compile_kernel(matmul_bias_relu.compile_ir(X, X, X[0], X, 16, 16, 16, BM=8, BN=16, BK=8), "generic")
    bias = np.ones(16, np.float32)
    c = np.asfortranarray(np.zeros((16, 16), np.float32))
    args = expand_args(ck.arg_plan, [X, X, bias, c, 16, 16, 16])
    assert args[10:13] == [bias, 16, 1]            # 1D array: ptr, shape0, stride0
    assert args[13:18] == [c, 16, 16, 1, 16]       # column-major strides in elements
    mod = _gemm_ir()
    k1 = cache_key(matmul, mod, "generic", {"num_subgroups": 1}, False)
    assert k1 != cache_key(matmul, mod, "generic", {"num_subgroups": 2}, False)
    assert k1 != cache_key(matmul, mod, "pvc", {"num_subgroups": 1}, True)


def test_register_strips_follow_the_cpu_vector_registers(monkeypatch):
    """A 6 x 32 tile_mma is one register strip with AVX-512's 32 x 64 B registers and strips of 2
    rows with AVX2's 16 x 32 B, so the code differs; the register shape is part of the compile
    cache key (code built for one never reused on the other)."""
    from xejit.codegen import lower_generic
    assert lower_generic.cpu_vector_registers() in ((16, 32), (32, 64))
    mod = _gemm_ir()
    llir, keys = set(), set()
    for regs in ((16, 32), (32, 64)):
        monkeypatch.setattr(lower_generic, "VECTOR_REGS", regs[0])
        monkeypatch.setattr(lower_generic, "VECTOR_BYTES", regs[1])
        ck = compile_kernel(matmul.compile_ir(X, X, X, 16, 32, 16, BM=6, BN=32, BK=8), "generic")
        llir.add(ck.asm["llir"])
        keys.add(cache_key(matmul, mod, "generic", {"num_subgroups": 1}, False))
    assert len(llir) == 2 and len(keys) == 2


@pytest.mark.parametrize("arch,regs", [("skx", (32, 64)), ("SapphireRapids", (32, 64)), ("znver4", (32, 64)),
                                       ("core-avx2", (16, 32)), ("haswell", (16, 32))])
def test_cpu_vector_registers_follow_the_runtimes_target_arch(monkeypatch, arch, regs):
    """CL_CONFIG_CPU_TARGET_ARCH makes the OpenCL CPU runtime compile for the named CPU: the
    register file xejit sizes its strips by is that CPU's, whatever /proc/cpuinfo says."""
    from xejit.codegen import lower_generic
    monkeypatch.setenv("CL_CONFIG_CPU_TARGET_ARCH", arch)
    assert lower_generic.cpu_vector_registers() == regs


@pytest.mark.parametrize("kernel,args,kw", [
    (softmax, (X, X), {"BM": 4, "BN": 32, "num_subgroups": 2}),
    (matmul_splitk, (X, X, X, 16, 16, 16), {"BM": 8, "BN": 16, "BK": 8, "KSPLIT": 2}),
])
def test_other_kernels_validate(kernel, args, kw):
    validate(compile_kernel(kernel.compile_ir(*args, **kw), "generic").spv)


@pytest.mark.parametrize("value,runs", [("1", True), ("0", False), ("", False)])
def test_spirv_val_runs_only_with_xejit_validate(monkeypatch, value, runs):
    """spirv-val is the test suite's check (conftest sets XEJIT_VALIDATE=1), not every user's
    compile; the module is the same either way."""
    from xejit.codegen import spirv
    seen = []
    real = spirv.validate
    monkeypatch.setattr(spirv, "validate", lambda spv: (seen.append(len(spv)), real(spv))[1])
    monkeypatch.setenv("XEJIT_VALIDATE", value)
    ck = compile_kernel(_gemm_ir(), "generic")
    assert bool(seen) is runs and ("spirv-val" in ck.timings) is runs
    validate(ck.spv)   # valid either way


def test_generic_path_runs_its_pass_list_in_the_emission_worker(monkeypatch):
    """The generic path's IR is optimised by GENERIC_PASSES in the emission worker (the compiler's
    process does not load LLVM), the XeGPU path's by its target's ``llvm_pipeline``; the optimised IR
    comes back with the SPIR-V, smaller than what was sent."""
    from xejit.codegen import spirv
    from xejit.codegen.compiler import GENERIC_PASSES
    sent = []
    real = spirv._emitter.request
    monkeypatch.setattr(spirv._emitter, "request", lambda text, ext: (sent.append(text), real(text, ext))[1])
    ck = compile_kernel(_gemm_ir(), "generic")
    head, _, body = sent[-1].partition("\n")
    assert head == ";xejit-opt=" + ",".join(GENERIC_PASSES)
    assert "define" in ck.asm["llir"] and len(ck.asm["llir"]) < len(body)
    assert ck.timings["llvm-opt"] > 0
    validate(ck.spv)
    compile_kernel(_gemm_ir(), "pvc", emulate=True)    # Target.llvm_pipeline
    assert sent[-1].startswith(";xejit-opt=O2-function\n")
    compile_kernel(_gemm_ir(), "dg2", emulate=True)
    assert sent[-1].startswith(";xejit-opt=O2\n")


def test_emulated_kernels_are_built_unoptimised():
    """The CPU driver builds an emulated kernel with the emulation's options (its optimising build
    of the emulated attention backward took 12-18 s); a GPU build keeps its register-file option,
    and the CPU runtime was configured to widen -O0 subgroup kernels (xejit came before dpctl)."""
    emulated = compile_kernel(_gemm_ir(), "pvc", emulate=True, grf_mode="256")
    assert emulated.build_options("opencl") == emulation.BUILD_OPTIONS == "-cl-opt-disable"
    assert compile_kernel(_gemm_ir(), "pvc", grf_mode="256").build_options("opencl") == "-cl-intel-256-GRF-per-thread"
    assert compile_kernel(_gemm_ir(), "generic").build_options("opencl") == ""
    assert _icd.UNOPTIMISED_SUBGROUPS and os.environ["CL_CONFIG_CPU_O0_VECTORIZATION"] == "True"
