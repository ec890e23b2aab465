"""The kernel's cache key covers the helpers it inlines and the constants it reads."""
import xejit
import xejit.language as xl
from xejit.jit import dependency_hash


def _make(scale_value, helper_body_variant):
    SCALE = scale_value

    if helper_body_variant == 0:
        @xl.inline
        def helper(x):
            return x * 2.0
    else:
        @xl.inline
        def helper(x):
            return x * 3.0

    @xejit.kernel(interpret=True)
    def k(x, y, BN: xl.constexpr):
        t = xl.load_tile(xl.init_tile(x, [0, 0], [1, BN]))
        xl.store_tile(xl.init_tile(y, [0, 0], [1, BN]), helper(t) + SCALE)

    return k


def test_helper_source_and_constants_change_the_hash():
    base = _make(1.0, 0).source_hash
    assert _make(1.0, 0).source_hash == base          # same code, same key
    assert _make(2.0, 0).source_hash != base          # a closure constant changed
    assert _make(1.0, 1).source_hash != base          # the inlined helper changed


def test_plain_function_hash_is_stable():
    def f(x):
        return x
    assert dependency_hash(f) == dependency_hash(f)
