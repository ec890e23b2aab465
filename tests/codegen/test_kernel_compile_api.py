"""``kernel.compile(..., target=...)``: every stage of a real compile, for any target."""
import numpy as np
import pytest

from xejit.codegen.spirv import validate

from ..kernels import matmul as matmul_kernel


def test_compile_for_the_device_target_has_every_stage():
    a = np.ones((64, 32), np.float32)
    ck = matmul_kernel.compile(a, a, a, 64, 64, 32, BM=8, BN=32, BK=8)
    for stage in ("xetile", "xetile-sg", "llir", "spvasm"):
        assert ck.asm[stage], stage
    validate(ck.asm["spv"])
    assert "OpEntryPoint Kernel" in ck.asm["spvasm"]
    assert isinstance(ck.report(), str) and ck.timings


def test_pvc_report_counts_dpas_per_k_step_and_checks_the_register_file():
    torch = pytest.importorskip("torch")
    a = torch.ones((1024, 1024), dtype=torch.bfloat16)
    c = torch.ones((1024, 1024), dtype=torch.float32)
    meta = dict(BM=256, BN=256, BK=32, num_subgroups=32)
    # 32 subgroups as [8, 4]: a 32x64 fp32 accumulator per subgroup, K-step 32 in bf16:
    # (32/8) * (64/16) * (32/16) = 32 DPAS; tile data 32*64*4 + 32*32*2 + 32*64*2 B = 224 registers.
    ck = matmul_kernel.compile(a, a, c, 1024, 1024, 1024, target="pvc", **meta)
    assert ck.instructions["dpas"] == 32
    assert "224 of 128 registers" in ck.report() and "EXCEEDS" in ck.report()
    big = matmul_kernel.compile(a, a, c, 1024, 1024, 1024, target="pvc", grf_mode="256", **meta)
    assert "224 of 256 registers" in big.report() and "EXCEEDS" not in big.report()


def test_register_estimate_defers_to_the_measured_spill(monkeypatch):
    """The static count takes each tile whole; where Intel's compiler built the kernel with no
    spill, the report must not predict spills (dg2's 4096^3 pick streams its K-blocks)."""
    a = np.ones((1024, 1024), np.float16)
    c = np.ones((1024, 1024), np.float32)
    ck = matmul_kernel.compile(a, a, c, 1024, 1024, 1024, target="pvc", BM=256, BN=256, BK=32, num_subgroups=32)
    assert "EXCEEDS" in ck.estimated_registers() and "EXCEEDS" in ck.estimated_registers(4096)
    text = ck.estimated_registers(0)
    assert "EXCEEDS" not in text and "spills nothing" in text
    # report() asks for the measured figure (stand-ins for Intel's compiler's answer, no build)
    monkeypatch.setattr(type(ck), "_device_report", lambda self: [])
    monkeypatch.setattr(type(ck), "_measured_spill", lambda self: 0)
    assert "spills nothing" in ck.report() and "EXCEEDS" not in ck.report()
    monkeypatch.setattr(type(ck), "_measured_spill", lambda self: None)
    assert "EXCEEDS" in ck.report()
