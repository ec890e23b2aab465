"""The XeGPU dialect: subgroup-level ops that each map to one Xe hardware instruction, as data,
with their verifiers and numpy semantics (so the interpreter runs XeGPU IR).

Values are subgroup-level blocks (``vector<8x16xbf16>``; VNNI-packed B blocks are 3D,
``vector<8x16x2xbf16>`` = [rows / vnni, cols, vnni]); ``sg_map``-style lane layouts are
attached by ``codegen/passes/lane_distribution.py`` in a ``layout`` attribute and never change
values. Ops follow ``seeds/mlir-xegpu-dialect-doc.txt``:

=====================  ==================================================================
``create_nd_tdesc``    2D block descriptor: array, row/col offsets in the array's *memory*
                       view (a column-major array is viewed transposed), shape, array_length
``update_nd_offset``   move a descriptor (2D or block-scattered)
``load_nd``            2D block load: ``packed`` (VNNI), ``transpose`` (+``transpose_bit_width``),
                       ``padding``; one result per array block; out-of-bounds reads ``padding``;
                       ``transpose_blocks`` n: a transposed load whose memory rows give n results
                       side by side (n DPAS B blocks from one instruction)
``store_nd``           2D block store; out-of-bounds elements are dropped
``prefetch_nd``        2D block prefetch (no effect on values)
``dpas``               C + A @ B (B [K, N] or VNNI [K/v, N, v]); ``input_precision`` tf32
``create_tdesc``       scattered descriptor: per-element offsets (general form) or a logical
                       [h, w] block at (row, col) addressed element-wise (block form, the
                       fallback of 2D block IO)
``load_gather``        masked per-element load (block form: out-of-array elements masked off)
``store_scatter``      masked per-element store
``atomic_rmw``         per-element atomic read-modify-write; returns the old values
``init_nbarrier``, ``nbarrier_arrive``, ``nbarrier_wait``, ``fence``: synchronization
                       (no-ops in the interpreter, which runs one subgroup at a time)
``vector.extract_strided_slice``  rows/cols of a block (tile unpack between load and DPAS blocks)
=====================  ==================================================================

Target limits (DPAS shapes, 2D block sizes) are checked by :func:`verify_for_target`, which reads
a target descriptor passed in (``xejit.codegen.targets.Target``; this package imports nothing of
xejit).

Example:
    >>> import numpy as np
    >>> b = np.arange(16, dtype=np.float32).reshape(4, 4)
    >>> vnni_pack(b, 2)[0, :, :].tolist()   # rows 0 and 1 interleaved per column
    [[0.0, 4.0], [1.0, 5.0], [2.0, 6.0], [3.0, 7.0]]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from .core import verify_subgroups_attr
from .core import (ArrayType, Layout, OpDef, Operation, ScalarType, Type, VectorType, VerifyError,
                   f32, i1, i32, index, register_op)
from .interpreter import ATOMIC_LOCK, Buffer, Interpreter, impl
from .xetile_semantics import ATOMIC, _compute_dtype, cast_value, mma_reference

# ----------------------------------------------------------------------------------------------
# Types and runtime values
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorDescType(Type):
    """``!xegpu.tensor_desc``: a 2D block of memory (``scattered=False``), or a set of
    per-element addresses (``scattered=True``; ``shape`` is the shape of the gathered vector).

    ``layout`` is the lane distribution (sg_map: ``lane_layout``/``lane_data``) once assigned.
    """
    shape: tuple[int, ...]
    dtype: ScalarType
    array_length: int = 1
    boundary_check: bool = True
    scattered: bool = False
    layout: Optional[Layout] = None

    def __str__(self) -> str:
        attrs = []
        if self.array_length != 1:
            attrs.append(f"array_length = {self.array_length}")
        if not self.boundary_check:
            attrs.append("boundary_check = false")
        body = "x".join(map(str, self.shape)) + f"x{self.dtype}"
        if self.scattered:
            body += ", #xegpu.scatter_tdesc_attr<>"
        if attrs:
            body += f", #xegpu.block_tdesc_attr<{', '.join(attrs)}>"
        if self.layout is not None:
            body += f", {self.layout}"
        return f"!xegpu.tensor_desc<{body}>"


@dataclass(frozen=True)
class NbarrierType(Type):
    def __str__(self) -> str:
        return "!xegpu.nbarrier"


nbarrier = NbarrierType()


@dataclass(frozen=True)
class TDescValue:
    """Interpreter value of a tensor descriptor.

    2D: ``mem`` is the memory view (rows = slow dimension) as a :class:`Buffer`, ``offsets``
    (row, col) in it. Block-scattered: ``mem`` is the logical 2D array, offsets logical.
    General scattered: ``elem_offsets`` are element offsets from the base of ``mem``.
    """
    mem: Buffer
    offsets: tuple[int, int]
    shape: tuple[int, ...]
    array_length: int = 1
    elem_offsets: Optional[np.ndarray] = None


def vnni_factor(dtype: ScalarType) -> int:
    """Rows packed into one 32-bit value by the VNNI layout (2 for 16-bit, 4 for 8-bit)."""
    return max(1, 32 // dtype.bitwidth)


def vnni_pack(x: np.ndarray, v: int) -> np.ndarray:
    """[K, N] -> [K/v, N, v]: packed[i, n, j] = x[i*v + j, n] (lower row in lower bits)."""
    k, n = x.shape
    if k % v:
        raise ValueError(f"cannot VNNI-pack {k} rows by {v}")
    return np.ascontiguousarray(x.reshape(k // v, v, n).transpose(0, 2, 1))


def vnni_unpack(x: np.ndarray) -> np.ndarray:
    """[K/v, N, v] -> [K, N] (inverse of :func:`vnni_pack`)."""
    kv, n, v = x.shape
    return np.ascontiguousarray(x.transpose(0, 2, 1).reshape(kv * v, n))


def memory_view(arr: Buffer, array_type: ArrayType) -> Buffer:
    """The 2D memory view of an array (a column-major array seen transposed; 1D as [1, n])."""
    data = arr.view2d
    if array_type.rank == 2 and tuple(array_type.order) == (0, 1):
        data = data.T
    return Buffer(data, arr.dtype)


def read_block(mem: Buffer, r0: int, c0: int, h: int, w: int, pad: Any, dtype: ScalarType) -> np.ndarray:
    """[h, w] block of ``mem`` at (r0, c0); elements outside the array read ``pad``."""
    out = cast_value(np.full((h, w), pad), dtype)
    H, W = mem.data.shape
    rr0, rr1, cc0, cc1 = max(r0, 0), min(r0 + h, H), max(c0, 0), min(c0 + w, W)
    if rr0 < rr1 and cc0 < cc1:
        out[rr0 - r0:rr1 - r0, cc0 - c0:cc1 - c0] = mem.read((slice(rr0, rr1), slice(cc0, cc1)))
    return out


def write_block(mem: Buffer, r0: int, c0: int, value: np.ndarray) -> None:
    h, w = value.shape
    H, W = mem.data.shape
    rr0, rr1, cc0, cc1 = max(r0, 0), min(r0 + h, H), max(c0, 0), min(c0 + w, W)
    if rr0 < rr1 and cc0 < cc1:
        mem.write((slice(rr0, rr1), slice(cc0, cc1)), value[rr0 - r0:rr1 - r0, cc0 - c0:cc1 - c0])


# ----------------------------------------------------------------------------------------------
# Verifiers
# ----------------------------------------------------------------------------------------------


def _fail(op: Operation, msg: str) -> None:
    raise VerifyError(msg, op)


def _tdesc(op: Operation, v, scattered: Optional[bool] = False) -> TensorDescType:
    t = v.type
    if not isinstance(t, TensorDescType):
        _fail(op, f"'{op.name}' needs a tensor descriptor, got {t}")
    if scattered is not None and t.scattered != scattered:
        _fail(op, f"'{op.name}' needs a {'scattered' if scattered else '2D block'} descriptor, got {t}")
    return t


def load_result_types(t: TensorDescType, packed: bool = False, transpose: bool = False,
                      transpose_bit_width: Optional[int] = None, transpose_blocks: int = 1) -> list[VectorType]:
    """Result types of ``load_nd`` on ``t`` (one per array block; a transposed load: one per
    ``transpose_blocks`` slice of its memory rows, i.e. of the result's columns)."""
    h, w = t.shape
    if transpose:
        h //= transpose_blocks
    if transpose and transpose_bit_width == 32 and t.dtype.bitwidth < 32:
        v = 32 // t.dtype.bitwidth
        shape: tuple[int, ...] = (w // v, h, v)     # transposed as 32-bit, i.e. VNNI-packed
    elif transpose:
        shape = (w, h)
    elif packed:
        v = vnni_factor(t.dtype)
        shape = (h // v, w, v)
    else:
        shape = (h, w)
    return [VectorType(shape, t.dtype)] * (t.array_length * (transpose_blocks if transpose else 1))


def _verify_create_nd(op: Operation) -> None:
    src, *offs = op.operands
    t = op.result.type
    if not isinstance(src.type, ArrayType):
        _fail(op, f"create_nd_tdesc needs an array, got {src.type}")
    if not isinstance(t, TensorDescType) or t.scattered or len(t.shape) != 2:
        _fail(op, "create_nd_tdesc produces a 2D block tensor_desc")
    if t.dtype != src.type.dtype:
        _fail(op, f"tensor_desc element type {t.dtype} differs from the array's {src.type.dtype}")
    if len(offs) != 2 or any(o.type != index for o in offs):
        _fail(op, "create_nd_tdesc takes two index offsets (row, col of the memory view)")
    if t.array_length < 1 or t.array_length & (t.array_length - 1):
        _fail(op, f"array_length must be a power of two, got {t.array_length}")


def _verify_update(op: Operation) -> None:
    t = _tdesc(op, op.operands[0], scattered=None)
    if len(op.operands) != 3 or any(o.type != index for o in op.operands[1:]):
        _fail(op, "update_nd_offset takes a descriptor and two index deltas")
    if op.result.type != t:
        _fail(op, "update_nd_offset returns the descriptor's type")


def _verify_load_nd(op: Operation) -> None:
    t = _tdesc(op, op.operands[0])
    packed = bool(op.attributes.get("packed", False))
    tr = op.attributes.get("transpose")
    if tr is not None and list(tr) != [1, 0]:
        _fail(op, f"load_nd transpose must be [1, 0], got {tr}")
    tbw = op.attributes.get("transpose_bit_width")
    if packed and tr is not None:
        _fail(op, "load_nd cannot be both packed and transposed (use transpose_bit_width = 32 for VNNI B)")
    if packed and t.dtype.bitwidth not in (8, 16):
        _fail(op, f"load_nd packed (VNNI) needs 8- or 16-bit data, got {t.dtype}")
    if packed and t.shape[0] % vnni_factor(t.dtype):
        _fail(op, f"load_nd packed: {t.shape[0]} rows are not a multiple of the VNNI factor "
                  f"{vnni_factor(t.dtype)}")
    if tbw is not None and (tbw != 32 or tr is None):
        _fail(op, "transpose_bit_width must be 32 and needs transpose")
    if tr is not None and tbw == 32 and t.dtype.bitwidth < 32 and t.shape[1] % (32 // t.dtype.bitwidth):
        _fail(op, f"a 32-bit transposed load needs a width multiple of {32 // t.dtype.bitwidth}")
    nb = op.attributes.get("transpose_blocks", 1)
    if nb != 1 and (tr is None or nb < 1 or t.shape[0] % nb or t.array_length != 1):
        _fail(op, f"transpose_blocks {nb} needs a transposed load of one block whose {t.shape[0]} "
                  "memory rows it divides")
    want = load_result_types(t, packed, tr is not None, tbw, nb)
    if [r.type for r in op.results] != want:
        _fail(op, f"load_nd of {t} produces {len(want)} x {want[0]}, got "
                  f"{', '.join(str(r.type) for r in op.results)}")


def _verify_store_nd(op: Operation) -> None:
    val, td = op.operands
    t = _tdesc(op, td)
    if t.array_length != 1:
        _fail(op, "store_nd needs array_length 1")
    if val.type != VectorType(t.shape, t.dtype):
        _fail(op, f"store_nd stores {VectorType(t.shape, t.dtype)}, got {val.type}")


def _verify_prefetch_nd(op: Operation) -> None:
    _tdesc(op, op.operands[0])
    verify_subgroups_attr(op)


DPAS_ACC = {"bf16": f32, "f16": f32, "f32": f32, "i8": i32, "u8": i32}


def dpas_shapes(op: Operation) -> tuple[int, int, int]:
    """(M, N, K) of a dpas op."""
    a, b = op.operands[0].type, op.operands[1].type
    m, k = a.shape
    n = b.shape[1]
    return m, n, k


def _verify_dpas(op: Operation) -> None:
    a, b, *c = op.operands
    for v, nm in ((a, "A"), (b, "B")):
        if not isinstance(v.type, VectorType):
            _fail(op, f"dpas {nm} must be a vector, got {v.type}")
    if len(a.type.shape) != 2:
        _fail(op, f"dpas A must be 2D [M, K], got {a.type}")
    m, k = a.type.shape
    if len(b.type.shape) == 3:
        kv, n, v = b.type.shape
        if v != vnni_factor(b.type.dtype) or kv * v != k:
            _fail(op, f"dpas B {b.type} is not a VNNI-packed [{k}, N] operand "
                      f"(want [{k // vnni_factor(b.type.dtype)}, N, {vnni_factor(b.type.dtype)}])")
    elif len(b.type.shape) == 2:
        k2, n = b.type.shape
        if k2 != k:
            _fail(op, f"dpas shapes do not chain: A is {m}x{k}, B is {k2}x{n}")
    else:
        _fail(op, f"dpas B must be [K, N] or VNNI [K/v, N, v], got {b.type}")
    if a.type.dtype != b.type.dtype:
        _fail(op, f"dpas A and B must have one element type, got {a.type.dtype} and {b.type.dtype}")
    acc = DPAS_ACC.get(a.type.dtype.name)
    if acc is None:
        _fail(op, f"dpas does not take {a.type.dtype}")
    want = VectorType((m, n), acc)
    if c and c[0].type != want:
        _fail(op, f"dpas accumulator must be {want}, got {c[0].type}")
    if op.result.type != want:
        _fail(op, f"dpas result must be {want}, got {op.result.type}")
    if a.type.dtype == f32 and op.attributes.get("input_precision") != "tf32" \
            and not op.attributes.get("software"):
        _fail(op, "dpas on f32 needs input_precision = \"tf32\" (or software = true: FMAs, no DPAS)")


def _verify_create_tdesc(op: Operation) -> None:
    src, *rest = op.operands
    t = op.result.type
    if not isinstance(src.type, ArrayType):
        _fail(op, f"create_tdesc needs an array, got {src.type}")
    if not isinstance(t, TensorDescType) or not t.scattered:
        _fail(op, "create_tdesc produces a scattered tensor_desc")
    if t.dtype != src.type.dtype:
        _fail(op, f"tensor_desc element type {t.dtype} differs from the array's {src.type.dtype}")
    if len(rest) == 1:
        off = rest[0].type
        if not isinstance(off, VectorType) or off.dtype != index or off.shape != t.shape:
            _fail(op, f"create_tdesc offsets must be vector<{'x'.join(map(str, t.shape))}xindex>")
    elif len(rest) == 2:
        if any(o.type != index for o in rest) or len(t.shape) != 2:
            _fail(op, "block-form create_tdesc takes (row, col) index offsets and a 2D shape")
    else:
        _fail(op, "create_tdesc takes an offsets vector, or a row and a column")


def _gather_shape(op: Operation, t: TensorDescType) -> tuple[int, ...]:
    if op.attributes.get("packed"):
        h, w = t.shape
        v = vnni_factor(t.dtype)
        return (h // v, w, v)
    return tuple(t.shape)


def _check_mask(op: Operation, mask, t: TensorDescType) -> None:
    if mask is not None and mask.type != VectorType(tuple(t.shape), i1):
        _fail(op, f"'{op.name}' mask must be vector<{'x'.join(map(str, t.shape))}xi1>, got {mask.type}")


def _verify_load_gather(op: Operation) -> None:
    td, *mask = op.operands
    t = _tdesc(op, td, scattered=True)
    _check_mask(op, mask[0] if mask else None, t)
    if op.result.type != VectorType(_gather_shape(op, t), t.dtype):
        _fail(op, f"load_gather of {t} produces {VectorType(_gather_shape(op, t), t.dtype)}")


def _verify_store_scatter(op: Operation) -> None:
    val, td, *mask = op.operands
    t = _tdesc(op, td, scattered=True)
    _check_mask(op, mask[0] if mask else None, t)
    if val.type != VectorType(tuple(t.shape), t.dtype):
        _fail(op, f"store_scatter stores {VectorType(tuple(t.shape), t.dtype)}, got {val.type}")


ATOMIC_KINDS = tuple(ATOMIC)


def _verify_atomic(op: Operation) -> None:
    td, mask, val = op.operands
    t = _tdesc(op, td, scattered=True)
    _check_mask(op, mask, t)
    if val.type != VectorType(tuple(t.shape), t.dtype) or op.result.type != val.type:
        _fail(op, "atomic_rmw takes and returns a vector of the descriptor's shape and type")
    if op.attributes.get("kind") not in ATOMIC_KINDS:
        _fail(op, f"atomic_rmw kind must be one of {ATOMIC_KINDS}")


def _verify_nbarrier(op: Operation) -> None:
    if op.name == "xegpu.init_nbarrier":
        if len(op.operands) != 2 or op.result.type != nbarrier:
            _fail(op, "init_nbarrier(id, num_threads) returns !xegpu.nbarrier")
    elif not op.operands or op.operands[0].type != nbarrier:
        _fail(op, f"'{op.name}' needs a !xegpu.nbarrier")


def _verify_fence(op: Operation) -> None:
    if op.attributes.get("memory_kind") not in ("global", "slm"):
        _fail(op, "fence memory_kind must be 'global' or 'slm'")
    if op.attributes.get("fence_scope") not in ("workgroup", "gpu"):
        _fail(op, "fence fence_scope must be 'workgroup' or 'gpu'")


def _verify_extract(op: Operation) -> None:
    src = op.operands[0].type
    offs, sizes = list(op.attributes.get("offsets", [])), list(op.attributes.get("sizes", []))
    if not isinstance(src, VectorType) or len(offs) != len(sizes) or len(offs) > len(src.shape):
        _fail(op, "extract_strided_slice needs offsets and sizes of at most the source's rank")
    full = [*sizes, *src.shape[len(sizes):]]
    for o, s, d in zip(offs, sizes, src.shape):
        if o < 0 or s <= 0 or o + s > d:
            _fail(op, f"slice [{o}, {o + s}) is outside a dimension of {d}")
    if op.result.type != VectorType(tuple(full), src.dtype):
        _fail(op, f"extract_strided_slice produces {VectorType(tuple(full), src.dtype)}")


register_op(OpDef("xegpu.create_nd_tdesc", 3, 1, verify=_verify_create_nd,
                  summary="2D block descriptor of an array's memory view at (row, col)"))
register_op(OpDef("xegpu.update_nd_offset", 3, 1, verify=_verify_update,
                  summary="move a descriptor by (row, col)"))
register_op(OpDef("xegpu.load_nd", 1, None, verify=_verify_load_nd,
                  attrs=("packed", "transpose", "transpose_bit_width", "transpose_blocks", "padding", "layout"),
                  summary="2D block load (VNNI packed / transposed); one result per array block"))
register_op(OpDef("xegpu.store_nd", 2, 0, pure=False, verify=_verify_store_nd,
                  summary="2D block store; out-of-bounds elements are dropped"))
register_op(OpDef("xegpu.prefetch_nd", 1, 0, pure=False, verify=_verify_prefetch_nd, attrs=("subgroups",),
                  summary="2D block prefetch to cache; `subgroups = [lo, hi]`: only those subgroups issue it"))
register_op(OpDef("xegpu.dpas", None, 1, verify=_verify_dpas,
                  attrs=("input_precision", "software", "layout"),
                  summary="matrix multiply-accumulate on the systolic array (software = true: the "
                          "same in FMAs, for full-precision f32)"))
register_op(OpDef("xegpu.create_tdesc", None, 1, verify=_verify_create_tdesc,
                  summary="scattered descriptor: element offsets, or a block addressed per element"))
register_op(OpDef("xegpu.load_gather", None, 1, verify=_verify_load_gather, attrs=("padding", "packed"),
                  summary="masked per-element load"))
register_op(OpDef("xegpu.store_scatter", None, 0, pure=False, verify=_verify_store_scatter,
                  summary="masked per-element store"))
register_op(OpDef("xegpu.atomic_rmw", 3, 1, pure=False, verify=_verify_atomic, attrs=("kind",),
                  summary="per-element atomic read-modify-write; returns the old values"))
register_op(OpDef("xegpu.init_nbarrier", 2, 1, pure=False, verify=_verify_nbarrier,
                  summary="named barrier (id, participating threads)"))
register_op(OpDef("xegpu.nbarrier_arrive", 1, 0, pure=False, verify=_verify_nbarrier,
                  summary="signal a named barrier"))
register_op(OpDef("xegpu.nbarrier_wait", 1, 0, pure=False, verify=_verify_nbarrier,
                  summary="wait on a named barrier"))
register_op(OpDef("xegpu.fence", 0, 0, pure=False, verify=_verify_fence,
                  attrs=("memory_kind", "fence_scope"), summary="memory fence"))
register_op(OpDef("vector.extract_strided_slice", 1, 1, verify=_verify_extract,
                  attrs=("offsets", "sizes"), summary="a sub-block (leading dimensions sliced)"))


# ----------------------------------------------------------------------------------------------
# Target checks
# ----------------------------------------------------------------------------------------------

_DPAS_TY = {"bf16": "bf16", "f16": "fp16", "f32": "tf32", "i8": "int8", "u8": "uint8"}


def dpas_type_name(dtype: ScalarType) -> str:
    """Operand type name of a DPAS on ``dtype`` as the target tables spell it."""
    return _DPAS_TY[dtype.name]


def block_op_kind(op: Operation) -> str:
    if op.name == "xegpu.load_nd":
        if op.attributes.get("packed"):
            return "load_transform"
        return "load_transpose" if op.attributes.get("transpose") is not None else "load"
    return {"xegpu.store_nd": "store", "xegpu.prefetch_nd": "prefetch"}[op.name]


def block_params(op: Operation) -> tuple[int, int, int, int]:
    """(elem_bits, width, height, count) of the 2D block instruction of a load/store/prefetch."""
    t = op.operands[0 if op.name != "xegpu.store_nd" else 1].type
    h, w = t.shape
    bits = t.dtype.bitwidth
    if op.name == "xegpu.load_nd" and op.attributes.get("transpose") is not None \
            and op.attributes.get("transpose_bit_width") == 32 and bits < 32:
        w, bits = w * bits // 32, 32
    return bits, w, h, t.array_length


def verify_for_target(fn, target, check_block_shape: Callable[..., Optional[str]]) -> None:
    """Check every DPAS and 2D block op of ``fn`` against ``target`` (a codegen Target);
    ``check_block_shape`` is ``xejit.codegen.targets.check_block_shape``."""
    for op in fn.walk():
        if op.name == "xegpu.dpas" and op.attributes.get("software"):
            continue     # a multiply-accumulate in code, not an instruction
        if op.name == "xegpu.dpas":
            if target.dpas is None:
                _fail(op, f"target {target.name!r} has no DPAS")
            m, n, k = dpas_shapes(op)
            ty = dpas_type_name(op.operands[0].type.dtype)
            acc = "i32" if op.result.type.dtype == i32 else "f32"
            why = target.dpas.supports(ty, ty, acc, m)
            if why:
                _fail(op, why)
            if n != target.dpas.n or k != target.dpas.k_of(ty):
                _fail(op, f"dpas {m}x{n}x{k} on {ty}: target {target.name!r} needs N={target.dpas.n}, "
                          f"K={target.dpas.k_of(ty)}")
        elif op.name in ("xegpu.load_nd", "xegpu.store_nd", "xegpu.prefetch_nd") and target.block_io is not None:
            bits, w, h, c = block_params(op)
            why = check_block_shape(target, bits, w, h, c, op=block_op_kind(op))
            if why:
                _fail(op, why)


# ----------------------------------------------------------------------------------------------
# numpy semantics
# ----------------------------------------------------------------------------------------------


@impl("xegpu.create_nd_tdesc")
def _create_nd(it: Interpreter, op: Operation, args):
    buf, r, c = args
    t = op.result.type
    return [TDescValue(memory_view(buf, op.operands[0].type), (int(r), int(c)), t.shape, t.array_length)]


@impl("xegpu.update_nd_offset")
def _update(it, op, args):
    td, dr, dc = args
    return [TDescValue(td.mem, (td.offsets[0] + int(dr), td.offsets[1] + int(dc)), td.shape,
                       td.array_length, td.elem_offsets)]


@impl("xegpu.load_nd")
def _load_nd(it, op, args):
    td = args[0]
    t = op.operands[0].type
    h, w = t.shape
    pad = op.attributes.get("padding", 0)
    out = []
    for a in range(t.array_length):
        blk = read_block(td.mem, td.offsets[0], td.offsets[1] + a * w, h, w, pad, t.dtype)
        if op.attributes.get("transpose") is not None:
            blk = np.ascontiguousarray(blk.T)
            if op.attributes.get("transpose_bit_width") == 32 and t.dtype.bitwidth < 32:
                # 32-bit words of v consecutive elements of a memory row, transposed: the
                # words become rows of the result, i.e. VNNI-packed [w/v, h, v].
                blk = vnni_pack(blk, 32 // t.dtype.bitwidth)
            nb = op.attributes.get("transpose_blocks", 1)
            out.extend(np.ascontiguousarray(x) for x in np.split(blk, nb, axis=1))
            continue
        elif op.attributes.get("packed"):
            blk = vnni_pack(blk, vnni_factor(t.dtype))
        out.append(blk)
    return out


@impl("xegpu.store_nd")
def _store_nd(it, op, args):
    val, td = args
    write_block(td.mem, td.offsets[0], td.offsets[1], np.asarray(val))


@impl("xegpu.prefetch_nd", "xegpu.nbarrier_arrive", "xegpu.nbarrier_wait", "xegpu.fence")
def _noop(it, op, args):
    return None


@impl("xegpu.init_nbarrier")
def _init_nbarrier(it, op, args):
    return [("nbarrier", int(args[0]), int(args[1]))]


@impl("xegpu.dpas")
def _dpas(it, op, args):
    a, b, *c = args
    if b.ndim == 3:
        b = vnni_unpack(b)
    return [mma_reference(op, a, b, c)]


@impl("xegpu.create_tdesc")
def _create_tdesc(it, op, args):
    buf, *rest = args
    t = op.result.type
    if len(rest) == 1:
        return [TDescValue(buf, (0, 0), t.shape, 1, np.asarray(rest[0], dtype=np.int64))]
    return [TDescValue(Buffer(buf.view2d, buf.dtype), (int(rest[0]), int(rest[1])), t.shape)]


def _gather_index(td: TDescValue):
    """(numpy index into td.mem, in-bounds mask) of every element of a scattered descriptor."""
    if td.elem_offsets is not None:
        offs = td.elem_offsets
        strides = [s // td.mem.data.itemsize for s in td.mem.data.strides]
        size = td.mem.data.size
        ok = (offs >= 0) & (offs < size)
        return offs, ok, strides
    h, w = td.shape
    rows = td.offsets[0] + np.arange(h)[:, None] + np.zeros((1, w), np.int64)
    cols = td.offsets[1] + np.arange(w)[None, :] + np.zeros((h, 1), np.int64)
    H, W = td.mem.data.shape
    ok = (rows >= 0) & (rows < H) & (cols >= 0) & (cols < W)
    return (rows, cols), ok, None


def _gather_read(td: TDescValue, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    idx, ok, _ = _gather_index(td)
    m = ok & mask
    if td.elem_offsets is not None:
        vals = td.mem.read(td.mem.flat_to_index(idx[m])) if m.any() else np.zeros(0)
    else:
        vals = td.mem.read((idx[0][m], idx[1][m]))
    return vals, m


@impl("xegpu.load_gather")
def _load_gather(it, op, args):
    td, *mask = args
    t = op.operands[0].type
    mask = np.asarray(mask[0], bool) if mask else np.ones(t.shape, bool)
    out = cast_value(np.full(t.shape, op.attributes.get("padding", 0)), t.dtype)
    vals, m = _gather_read(td, mask)
    if m.any():
        out[m] = vals
    if op.attributes.get("packed"):
        out = vnni_pack(out, vnni_factor(t.dtype))
    return [out]


def _scatter_write(td: TDescValue, m: np.ndarray, vals: np.ndarray) -> None:
    if not m.any():
        return
    idx, _, _ = _gather_index(td)
    if td.elem_offsets is not None:
        td.mem.write(td.mem.flat_to_index(idx[m]), vals)
    else:
        td.mem.write((idx[0][m], idx[1][m]), vals)


@impl("xegpu.store_scatter")
def _store_scatter(it, op, args):
    val, td, *mask = args
    t = op.operands[1].type
    mask = np.asarray(mask[0], bool) if mask else np.ones(t.shape, bool)
    _, ok, _ = _gather_index(td)
    m = ok & mask
    _scatter_write(td, m, np.asarray(val)[m])


@impl("xegpu.atomic_rmw")
def _atomic(it, op, args):
    td, mask, val = args
    t = op.operands[0].type
    old = cast_value(np.zeros(t.shape), t.dtype)
    with ATOMIC_LOCK:   # subgroups interpreted as threads must not interleave here
        cur, m = _gather_read(td, np.asarray(mask, bool))
        if m.any():
            old[m] = cur
            ct = _compute_dtype(t.dtype)
            new = ATOMIC[op.attributes["kind"]](cur.astype(ct), np.asarray(val)[m].astype(ct))
            _scatter_write(td, m, cast_value(new, t.dtype))
    return [old]


@impl("vector.extract_strided_slice")
def _extract(it, op, args):
    sl = tuple(slice(o, o + s) for o, s in zip(op.attributes["offsets"], op.attributes["sizes"]))
    return [np.ascontiguousarray(np.asarray(args[0])[sl])]


__all__ = ["TensorDescType", "TDescValue", "NbarrierType", "nbarrier", "vnni_pack", "vnni_unpack",
           "vnni_factor", "memory_view", "load_result_types", "verify_for_target", "dpas_shapes",
           "dpas_type_name", "block_params", "block_op_kind"]
