"""``kernel.compile(..., target=...)``: every stage of a real compile, for any target."""
import numpy as np
import pytest

from xejit.codegen.spirv import validate

from .kernels import matmul as matmul_kernel


def test_compile_for_the_device_target_has_every_stage():
    a = np.ones((64, 32), np.float32)
    ck = matmul_kernel.compile(a, a, a, 64, 64, 32, BM=8, BN=32, BK=8)
    for stage in ("xetile", "xetile-sg", "llir", "spvasm"):
        assert ck.asm[stage], stage
    validate(ck.asm["spv"])
    assert "OpEntryPoint Kernel" in ck.asm["spvasm"]
    assert isinstance(ck.report(), str) and ck.timings
