"""Kernels for the autotuner tests (module-level so the frontend can read their source)."""
import xejit
import xejit.language as xl


@xejit.kernel
def repeat_kernel(x, y, n, BN: xl.constexpr, REPEAT: xl.constexpr):
    """y = f^REPEAT(x) + 1 with f(v) = exp(-v / 2): a recurrence the compiler cannot fold or
    hoist, so the cost grows with REPEAT (see :func:`repeat_reference`)."""
    off = xl.program_id(0) * BN
    acc = xl.load_tile(xl.init_tile(x, [0, off], [1, BN]))
    for i in range(0, REPEAT):
        acc = xl.exp(acc * -0.5)
    xl.store_tile(xl.init_tile(y, [0, off], [1, BN]), acc + 1.0)


def repeat_reference(x, repeat):
    import numpy as np
    acc = x.astype(np.float64)
    for _ in range(repeat):
        acc = np.exp(acc * -0.5)
    return acc + 1.0


@xejit.kernel
def accumulate_kernel(x, y, n, BN: xl.constexpr, REPEAT: xl.constexpr):
    """y += x (in place): a second run without restoring y would add x twice."""
    off = xl.program_id(0) * BN
    tx = xl.load_tile(xl.init_tile(x, [0, off], [1, BN]))
    acc = tx * 0.0
    for i in range(0, REPEAT):
        acc = acc + tx
    ty = xl.init_tile(y, [0, off], [1, BN])
    xl.store_tile(ty, xl.load_tile(ty) + acc / REPEAT)
