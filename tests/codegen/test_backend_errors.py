"""Back-end errors read like front-end ones: file:line:col, the kernel's source line, a caret."""
import numpy as np
import pytest

import xejit
from xejit.codegen.compiler import CompilerError
from xejit.ir.core import i32
from xejit.kernels.gemm import gemm_kernel
import xejit.language as xl


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


@xejit.kernel
def _scale(x, y, BM: xl.constexpr, BN: xl.constexpr):
    t = xl.load_tile(xl.init_tile(x, [0, 0], [BM, BN]))
    xl.store_tile(xl.init_tile(y, [0, 0], [BM, BN]), t * 2.0)


@pytest.mark.parametrize("target,rows", [("pvc", 2**40), ("generic", 4096)])
def test_huge_tiles_are_refused_up_front(target, rows):
    """A 2^40-row tile used to compile forever (13 GB in 60 s); 4096x16 took 52 s on generic."""
    import time
    x = np.ones((64, 64), np.float32)
    t0 = time.perf_counter()
    with pytest.raises(CompilerError, match=r"elements per subgroup; xejit compiles at most 16384") as info:
        _scale.compile(x, x, BM=rows, BN=16, target=target)
    assert time.perf_counter() - t0 < 60 and str(info.value).endswith("^")
