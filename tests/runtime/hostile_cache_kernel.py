"""A kernel in a file of its own (its source must be readable in a child process too)."""
import xejit
import xejit.language as xl


@xejit.kernel
def add_one(x, y, BN: xl.constexpr):
    t = xl.load_tile(xl.init_tile(x, [0, 0], [1, BN]))
    xl.store_tile(xl.init_tile(y, [0, 0], [1, BN]), t * 2.0 + 1.0)
