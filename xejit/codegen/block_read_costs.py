"""What one k-step of a GEMM subgroup issues where there is no 2D block IO (dg2), for the
autotuner's perf model (``matmul._perf_model`` via ``autotuner.estimate_gemm``).

The counts follow the lowering's plan of the fast k-loop version:

* row-major B (``transposed_dpas.py``, C^T = B^T A^T): A^T is one per-lane row load per 8 rows of
  A and K-block; 16- and 8-bit B of decode tiles (8 rows, 32 columns or more) is read unpacked,
  its DPAS split by column parity (``parity_dpas.py``, v = 32 / bits parities): a lane-row load
  per 8 v columns and 8 rows of K, v times the DPAS and the spread of A^T; otherwise B^T is either packed on registers from v = 32 / bits per-lane row loads per
  K-block and pair of 8-column array blocks (:data:`B_ROW_BLOCKS`), a :data:`PACK_PER_WORD`
  instructions per packed word, or -- B staged in SLM (``slm_staging.py``) -- one per-lane SLM load
  per 8 columns and K-block, plus the work item's share of the panel (v row loads, its q words
  packed, one SLM store) and the barrier;
* column-major B (``block_reads.py``, ``lanerow``): A is a subgroup block read per row and K-block
  (one register per send) -- or, where every subgroup of the workgroup takes the same 8 rows
  (decode), staged in SLM once per workgroup (``decode_slm.py``: the work item's share, one
  per-lane SLM load a K-block, a barrier) -- B one per-lane 8-word load per 8 columns and K-block.

Every message costs two instructions: the send and its address (dg2's messages take no immediate
offset, so each has an address register of its own, one add a step; read from Intel's compiler's
ISA for acm-g10). Decode tiles (8 rows of A) show why the counts matter: A's reads are shared by
the tile's N / 8 DPAS only when column-major, while row-major B's packing is per DPAS.
"""
from __future__ import annotations

from typing import Optional

from .parity_dpas import parity_mode, ways
from .transposed_dpas import B_ROW_BLOCKS


#: instructions per 32-bit word of B^T packed on registers, by element bits: 16-bit halves of
#: two rows take a shift and a bfn a word (Intel's compiler's ISA); 8-bit quads 5 (a two-stage
#: byte transpose: Intel's compiler masks before each shift, an and, a shift and a bfn a word in
#: the first stage, a shift and a bfn in the second; int8 decode 8x32 tiles 201 instructions a
#: k-step, 160 of them packing 32 words; four masked shifts a byte took about 7.5)
PACK_PER_WORD = {16: 2, 8: 5}
#: the same for a work item's share of a staged panel (``slm_staging.py``: its own packing, 8-bit
#: words by ``pack_word``, about 8 a word)
SHARE_PACK_PER_WORD = {16: 2, 8: 8}

#: a word of A's row staged by a work item (``decode_slm.py``) as its elements' v parities: 16-bit
#: B 4 (an and or a shift an element and parity; float B: ``parity_mode`` "staged-checked"), 8-bit
#: B 20 instructions (Intel's compiler's ISA, int8 8x256x32/8sg: byte moves for some of the 26
#: ands and shifts)
STAGED_SPREAD_PER_WORD = {16: 4, 8: 20}

#: instructions of a k-step's loop control (the counter, the compare, the branch, a column move)
LOOP_CONTROL = 4
#: the staged panel's SLM fence and barrier (``slm_staging.py``, read from the ISA)
BARRIER = 5


def kstep_costs(sm: int, sn: int, BK: int, k: int, bits: int, dpas_m: int, dpas_n: int,
                col_b: bool, staged_words: Optional[int] = None, a_staged: Optional[int] = None,
                *, integer: bool) -> dict[str, int]:
    """Per k-step of a subgroup's ``sm x sn`` tile: ``dpas_per_kstep`` (the tile's work in
    DPAS), ``loads_per_kstep`` (messages, two instructions each: send and address),
    ``other_per_kstep`` (packing, spread, DPAS beyond the work, barrier, loop control) and
    ``dpas_issued_per_kstep`` (what the k-loop issues: v times the work by column parity). ``staged_words``: B staged in SLM with that many words a work item;
    ``a_staged``: A staged in SLM by the workgroup (``decode_slm.py``): column-major B's A panel,
    or by column parity the A^T spread, that many words of A's row a work item stages a k-step;
    ``integer``: B is an integer type (``parity_dpas.parity_mode``)."""
    kb = BK // k                       # DPAS K-blocks a step (32 bytes of K each)
    mblocks, nblocks = -(-sm // dpas_m), sn // dpas_n
    dpas = mblocks * nblocks * kb
    other, issued = LOOP_CONTROL, dpas
    if col_b and a_staged:             # A from SLM: a per-lane load a K-block; the work item's
        loads = kb + nblocks * kb + 2  # share (a global load, an SLM block write); the barrier
        other += BARRIER
    elif col_b:                        # A: a block read per row and K-block; B: lane rows
        loads = sm * kb + nblocks * kb
    else:
        v = 32 // bits
        loads = mblocks * kb           # A^T: a per-lane row load per 8 rows and K-block
        if staged_words:
            loads += nblocks * kb + v + 1      # B^T from SLM; the panel share's v rows, its store
            other += staged_words * SHARE_PACK_PER_WORD[bits] + BARRIER
        elif parity_mode(sm, nblocks, bits, integer, bool(a_staged)):
            # B unpacked by column parity, the A^T spread staged by the workgroup (parity_dpas.py,
            # decode_slm.py): B's lane-row loads, a
            # per-lane SLM load a spread operand (v x v a K-block), no A^T load; the work item's
            # words (a row load, their spread, an SLM store a parity) and the barrier
            w = ways(bits)
            loads += nblocks * kb + w * w * kb + 1 + w - mblocks * kb
            other += (w - 1) * dpas + STAGED_SPREAD_PER_WORD[bits] * a_staged + BARRIER
            issued = w * dpas
        else:
            loads += v * -(-nblocks // B_ROW_BLOCKS) * kb
            other += 8 * nblocks * kb * PACK_PER_WORD[bits]     # 8 words a B^T operand
    return {"dpas_per_kstep": dpas, "loads_per_kstep": loads, "other_per_kstep": other,
            "dpas_issued_per_kstep": issued}
