"""The kernel language: element types, ``constexpr`` and the tile ops usable inside ``@xejit.kernel``.

The functions here are *markers*: the frontend recognizes them by their ``__xejit_builtin__``
name and emits XeTile IR; calling one outside a kernel raises. Semantics are in docs/language.md.

Example:
    >>> import xejit, xejit.language as xl
    >>> @xejit.kernel(interpret=True)
    ... def scale(x, y, n, BN: xl.constexpr):
    ...     t = xl.load_tile(xl.init_tile(x, [0, xl.program_id(0) * BN], [1, BN]))
    ...     xl.store_tile(xl.init_tile(y, [0, xl.program_id(0) * BN], [1, BN]), t * 2.0)
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from .ir.core import Layout, bf16, f16, f32, i1, i8, i32, i64, index, u8, wg_map as _wg_map

bfloat16 = bf16
float16 = f16
float32 = f32
int8 = i8
uint8 = u8
int32 = i32
int64 = i64
int1 = i1
index = index  # noqa: PLW0127  (re-export)


class constexpr:
    """Annotation of a compile-time parameter (``BM: xl.constexpr``); its value is part of the
    specialization key and folds into the IR."""

    def __init__(self, value: Any = None):
        self.value = value

    def __repr__(self) -> str:
        return f"constexpr({self.value!r})"


def _builtin(name: str) -> Callable[[Callable], Callable]:
    def deco(fn: Callable) -> Callable:
        fn.__xejit_builtin__ = name
        return fn
    return deco


def _kernel_only(*args, **kwargs):
    raise RuntimeError("xejit.language functions can only be called inside an @xejit.kernel")


def inline(fn: Callable) -> Callable:
    """Mark a helper function for inlining into kernels that call it."""
    fn.__xejit_inline__ = True
    return fn


def wg_map(sg_layout: Sequence[int], sg_data: Sequence[int] | None = None) -> Layout:
    """Workgroup layout of a tile: ``sg_layout`` subgroups, each owning ``sg_data`` elements
    (default: tile shape / sg_layout). Usable inside kernels (compile time) and on the host."""
    return _wg_map(sg_layout, sg_data)


wg_map.__xejit_compile_time__ = True


def layout(**fields: Sequence[int]) -> Layout:
    """Full ``#xegpu.layout`` (sg_layout, sg_data, inst_data, lane_layout, lane_data, order)."""
    return Layout(**{k: tuple(v) for k, v in fields.items()})


layout.__xejit_compile_time__ = True


def cdiv(a, b):
    """Ceiling division; works on the host and inside kernels (runtime or compile-time ints)."""
    return -(-a // b)


cdiv.__xejit_builtin__ = "cdiv"


def static_range(*args):
    """A loop unrolled at compile time: ``for i in xl.static_range(4):`` (bounds must be constexpr)."""
    return range(*args)


static_range.__xejit_builtin__ = "static_range"

# Each stub's docstring is its user documentation; the frontend implements it.
_STUBS = {
    "program_id": "program_id(axis) -> index: this workgroup's id along grid axis 0, 1 or 2.",
    "num_programs": "num_programs(axis) -> index: the grid size along an axis.",
    "init_tile": "init_tile(array, offsets, shape, order=None, wg_map=None) -> tile; "
                 "init_tile(array, elem_offsets) -> scatter tile (for load_gather/store_scatter).",
    "load_tile": "load_tile(tile, padding=0) -> vector; out-of-bounds elements read `padding`.",
    "store_tile": "store_tile(tile, value): out-of-bounds elements are dropped.",
    "prefetch_tile": "prefetch_tile(tile, locality=3): cache hint, no effect on values.",
    "update_tile_offset": "update_tile_offset(tile, d0, d1) -> tile moved by (d0, d1).",
    "tile_mma": "tile_mma(a, b, acc=None, wg_map=None, input_precision=None) -> acc + a @ b.",
    "atomic_rmw_tile": "atomic_rmw_tile(tile, value, kind='add') -> old values.",
    "tile_reduce": "tile_reduce(x, kind, axis) -> x reduced along axis to size 1.",
    "tile_broadcast": "tile_broadcast(x, shape) -> x repeated along its size-1 dims.",
    "tile_transpose": "tile_transpose(x, wg_map=None) -> x.T.",
    "convert_layout": "convert_layout(x, wg_map) -> x redistributed over subgroups.",
    "load_gather": "load_gather(tile, mask=None, padding=0) -> vector.",
    "store_scatter": "store_scatter(tile, value, mask=None).",
    "zeros": "zeros(shape, dtype) -> vector of zeros.",
    "full": "full(shape, value, dtype) -> vector filled with value.",
    "arange": "arange(start, end, axis=1) -> index vector [1, n] (axis=1) or [n, 1] (axis=0).",
    "where": "where(cond, a, b) -> element-wise select with broadcasting.",
    "maximum": "maximum(a, b) -> element-wise max.",
    "minimum": "minimum(a, b) -> element-wise min.",
    "sum": "sum(x, axis) -> tile_reduce add.",
    "max": "max(x, axis) -> tile_reduce max.",
    "min": "min(x, axis) -> tile_reduce min.",
    "exp": "exp(x)", "exp2": "exp2(x)", "log": "log(x)", "log2": "log2(x)", "sqrt": "sqrt(x)",
    "rsqrt": "rsqrt(x)", "tanh": "tanh(x)", "sin": "sin(x)", "cos": "cos(x)", "erf": "erf(x)",
    "abs": "abs(x)", "floor": "floor(x)", "ceil": "ceil(x)",
    "cast": "cast(x, dtype) -> x.to(dtype).",
    "device_print": "device_print(prefix, *values): print from each workgroup (interpreter only).",
}


def _make_stub(name: str, doc: str) -> Callable:
    def stub(*args, **kwargs):
        return _kernel_only()
    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = doc
    stub.__xejit_builtin__ = name
    return stub


for _name, _doc in _STUBS.items():
    globals()[_name] = _make_stub(_name, _doc)

__all__ = ["bfloat16", "float16", "float32", "int8", "uint8", "int32", "int64", "int1", "index",
           "constexpr", "inline", "wg_map", "layout", "cdiv", "static_range", *_STUBS]
