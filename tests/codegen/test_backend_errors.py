"""Back-end errors read like front-end ones: file:line:col, the kernel's source line, a caret."""
import numpy as np
import pytest

import xejit
from xejit.codegen.compiler import CompilerError
from xejit.ir.core import i32
from xejit.kernels.gemm import gemm_kernel


def test_blocking_error_points_at_the_kernel_line():
    a, c = np.empty((64, 64), np.int8), np.empty((64, 64), np.int32)
    with pytest.raises(xejit.CompilationError) as info:   # BK=16 int8: no DPAS A block of K=32
        gemm_kernel.compile(a, a, a, c, 64, 64, 64, target="pvc", ACC=i32, BM=128, BN=128, BK=16, num_subgroups=16)
    e = info.value
    assert isinstance(e, CompilerError) and isinstance(e, xejit.XejitError)
    lines = str(e).splitlines()
    assert lines[0].startswith(f"{e.file}:{e.line}:{e.col}: error: xetile.init_tile: ")
    assert e.file.endswith("gemm.py") and "does not split into 8x32 blocks" in lines[0]
    assert lines[1].strip() == "ta = xl.init_tile(a, [m, 0], [BM, BK])"
    assert lines[2] == " " * e.col + "^"


def test_error_without_a_location_has_no_placeholder_position():
    e = CompilerError("no location here")
    assert str(e) == "no location here" and isinstance(e, xejit.CompilationError)
