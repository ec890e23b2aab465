"""Lane distribution: attach the ``sg_map`` (``lane_layout`` / ``lane_data``) of every XeGPU
block value, per the xegpu RFC's "Rules of sg_map setting" for PVC (subgroup 16) and ARC/dg2
(subgroup 8). Layouts never change values; the lowering reads the per-lane fragment from them.

Rules (S = subgroup size; a block [h, w], VNNI-packed blocks [h/v, w, v] counted in 32-bit words):

* ``w <= S``: ``lane_layout = [S/w, w]``, ``lane_data = [1, 1]`` (tf32 A on PVC: [2, 8]);
  lane l holds column ``l % w`` of rows ``e*(S/w) + l // w``;
* ``w > S``: ``lane_layout = [1, S]``, ``lane_data = [1, w/S]`` (bf16 A on ARC: [1, 2]; int8 A:
  [1, 2] on PVC, [1, 4] on ARC); lane l holds columns ``l*w/S .. +w/S`` of every row;
* VNNI-packed B: ``lane_layout = [1, S]``, ``lane_data = [v, 1]`` (bf16 [2, 1], int8 [4, 1]).

This is exactly the per-work-item layout of SPV_INTEL_2d_block_io loads and of the DPAS
operands (SPV_INTEL_subgroup_matrix_multiply_accumulate), so loads feed DPAS without shuffles.

Example:
    >>> lane_map((8, 16), 16), lane_map((8, 8), 16), lane_map((8, 16), 8)
    ((1, 16, 1, 1), (2, 8, 1, 1), (1, 8, 1, 2))
    >>> lane_map((8, 16, 2), 16)
    (1, 16, 2, 1)
"""
from __future__ import annotations

from ...ir.core import Function, Layout, VectorType
from ...ir.xegpu import TensorDescType
from .common import CompilerError


def lane_map(shape: tuple[int, ...], sg: int) -> tuple[int, int, int, int]:
    """(lane_layout[0], lane_layout[1], lane_data[0], lane_data[1]) of a block value."""
    if len(shape) == 3:
        h, w, v = shape
        if w > sg:
            return (1, sg, v, w // sg)
        return (sg // w, w, v, 1)
    h, w = shape if len(shape) == 2 else (1, shape[0])
    if w <= sg:
        if sg % w:
            raise ValueError(f"a block {w} wide does not divide the subgroup of {sg}")
        return (sg // w, w, 1, 1)
    if w % sg:
        raise ValueError(f"a block {w} wide is not a multiple of the subgroup of {sg}")
    return (1, sg, 1, w // sg)


def per_lane_count(shape: tuple[int, ...], sg: int) -> int:
    """Elements (32-bit words for VNNI-packed blocks) each lane holds of a block value."""
    if len(shape) == 3:
        shape = shape[:2]
    h, w = shape if len(shape) == 2 else (1, shape[0])
    if w <= sg:
        return -(-h // (sg // w))
    return h * (w // sg)


def layout_of_shape(shape: tuple[int, ...], sg: int) -> Layout:
    l0, l1, d0, d1 = lane_map(shape, sg)
    return Layout(lane_layout=(l0, l1), lane_data=(d0, d1))


def run(fn: Function, target) -> Function:
    """Annotate (in place) every op producing a block vector with ``layout`` = its lane layout,
    and every block descriptor type with the sg_map of the data it moves. Returns ``fn``."""
    sg = target.subgroup_size
    for op in fn.walk():
        for r in op.results:
            t = r.type
            if isinstance(t, VectorType) and len(t.shape) in (2, 3):
                try:
                    lay = layout_of_shape(t.shape, sg)
                except ValueError as e:
                    raise CompilerError(f"cannot distribute {t} over {sg} lanes: {e}", op) from None
                if op.name == "xetile.tile_reduce":
                    break   # its verifier checks workgroup layouts; [h, 1] has lane_layout [sg, 1]
                if len(op.results) == 1 or op.name == "xegpu.load_nd":
                    op.attributes["layout"] = lay
                break
        if op.name == "xegpu.load_nd":
            t: TensorDescType = op.operands[0].type
            if t.dtype.bitwidth < 32 and op.attributes.get("packed"):
                v = 32 // t.dtype.bitwidth
                op.attributes["sg_map"] = Layout(lane_layout=(1, sg), lane_data=(v, 1))
            elif op.attributes.get("transpose") is not None:
                op.attributes["sg_map"] = Layout(lane_layout=(sg, 1), lane_data=(1, 1))
    return fn


__all__ = ["run", "lane_map", "per_lane_count", "layout_of_shape"]
