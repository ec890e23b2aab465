"""Reading the GPU ISA that Intel's compiler writes: instructions, loops, and the hot loop's mix.

The text is what ``ocloc disasm`` prints (IGA syntax): ``L<n>:`` labels, one instruction a line,
sends annotated after ``//`` with the message they carry (``load_block2d``, ``store_block2d``,
``scratch block``, ``.ss[...]`` for the scratch surface). The *hot loop* is the innermost loop
(a backward branch and the label it goes to) holding the most DPAS; for a GEMM that is the
k-loop. Its figures say whether the code is what the tile needs: DPAS, 2D block loads,
prefetches, stores, spill and private-memory sends, everything else.

Example:
    >>> text = '''
    ... L0:
    ... L16:
    ...         send.ugm (1|M0)  r35  r231  null:0  0x0  0x03F00283  {$1} // wr:1+0, rd:31; load_block2d.ugm.d16v.a64
    ...         dpas.8x8 (16|M0) r222:f r222:f r35:hf r67.0:hf {Atomic}
    ... (W)     add (1|M0)       r1.4<1>:q  r1.4<0;1,0>:q  32:w
    ... (W&~f3.1) jmpi           L16
    ... '''
    >>> loop = hot_loop(parse(text))
    >>> loop.dpas, loop.block_loads, loop.instructions, loop.per_dpas
    (1, 1, 4, 4.0)
"""
from __future__ import annotations

import re
from dataclasses import dataclass, fields

__all__ = ["Instruction", "LoopMix", "parse", "loops", "hot_loop", "mix"]

_LABEL = re.compile(r"^(L\d+):\s*$")
_BRANCHES = ("jmpi", "goto", "while", "brc", "brd")


@dataclass(frozen=True)
class Instruction:
    """One ISA instruction: its mnemonic (``dpas.8x8``, ``send.ugm``, ``add``), the execution
    size text (``16|M0``), the labels it may branch to, and the message comment of a send."""
    mnemonic: str
    exec_size: str
    targets: tuple[str, ...]
    comment: str
    no_mask: bool
    #: a DPAS that only Intel's compiler added: no accumulator, its destination as both sources
    #: (acm-g10 code has one ahead of each chain of DPAS; it computes nothing the kernel uses)
    dummy: bool = False

    @property
    def is_send(self) -> bool:
        return self.mnemonic.startswith("send")

    def send_kind(self) -> str:
        """``block_load``, ``prefetch``, ``block_store``, ``spill``, ``private`` or ``other``.

        Spills and fills are the no-mask, one-channel block messages to the scratch surface
        (``hword scratch block`` on Xe-HPC, ``(1|M0)`` transposed ``.ss[]`` messages on Xe2);
        per-lane messages to the scratch surface are private-memory accesses (arrays the
        compiler could not keep in registers)."""
        c = self.comment
        if "load_block2d" in c:
            return "prefetch" if re.search(r"rd:0\b", c) else "block_load"
        if "store_block2d" in c:
            return "block_store"
        if "scratch" in c:
            return "spill"
        if ".ss[" in c:
            spill = self.no_mask and self.exec_size.startswith("1|") and re.search(r"\.d\d+x\d+t\.", c)
            return "spill" if spill else "private"
        return "other"


def parse(text: str) -> list[Instruction | str]:
    """The listing as instructions and label names (``"L1432"``), in order."""
    out: list[Instruction | str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        m = _LABEL.match(line)
        if m:
            out.append(m.group(1))
            continue
        code, _, comment = line.partition("//")
        no_mask = code.startswith("(W")
        code = re.sub(r"^\([^)]*\)\s*", "", code)
        parts = code.split()
        if not parts:
            continue
        mnemonic = parts[0]
        exec_size = ""
        if len(parts) > 1 and parts[1].startswith("("):
            exec_size = parts[1].strip("()")
        targets = tuple(p for p in parts[1:] if re.fullmatch(r"L\d+", p)) \
            if mnemonic.split(".")[0] in _BRANCHES else ()    # goto.b: a backward goto
        dummy = False
        if mnemonic.startswith("dpas") and len(parts) >= 6:
            reg = [p.split(":")[0].split(".")[0] for p in parts[2:6]]
            dummy = reg[1] == "null" and reg[0] == reg[2] == reg[3]
        out.append(Instruction(mnemonic, exec_size, targets, comment.strip(), no_mask, dummy))
    return out


def loops(listing: list[Instruction | str]) -> list[tuple[int, int]]:
    """(first, last) positions of every loop: a branch back to a label at or before it."""
    where = {item: i for i, item in enumerate(listing) if isinstance(item, str)}
    found = []
    for i, item in enumerate(listing):
        if isinstance(item, Instruction):
            for t in item.targets:
                if t in where and where[t] <= i:
                    found.append((where[t], i))
    return found


@dataclass(frozen=True)
class LoopMix:
    """What one loop body issues (instruction counts; ``instructions`` excludes labels)."""
    instructions: int
    dpas: int
    block_loads: int
    prefetches: int
    block_stores: int
    spill_sends: int
    private_sends: int
    other_sends: int

    @property
    def per_dpas(self) -> float | None:
        """Instructions per DPAS (None in a loop without DPAS)."""
        return round(self.instructions / self.dpas, 2) if self.dpas else None

    @property
    def ideal_per_dpas(self) -> float | None:
        """The floor the tile gives: each DPAS, each 2D block load, prefetch and store once, and
        four instructions of loop control (two address updates, a compare, the branch)."""
        if not self.dpas:
            return None
        return round((self.dpas + self.block_loads + self.prefetches + self.block_stores + 4) / self.dpas, 2)

    def as_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d.update(per_dpas=self.per_dpas, ideal_per_dpas=self.ideal_per_dpas)
        return d


def mix(items: list[Instruction | str]) -> LoopMix:
    """The counts of :class:`LoopMix` over ``items``."""
    insts = [x for x in items if isinstance(x, Instruction)]
    kinds = [i.send_kind() for i in insts if i.is_send]
    return LoopMix(
        instructions=len(insts),
        dpas=sum(1 for i in insts if i.mnemonic.startswith("dpas") and not i.dummy),
        block_loads=kinds.count("block_load"), prefetches=kinds.count("prefetch"),
        block_stores=kinds.count("block_store"), spill_sends=kinds.count("spill"),
        private_sends=kinds.count("private"), other_sends=kinds.count("other"))


def hot_loop(listing: list[Instruction | str]) -> LoopMix | None:
    """The mix of the loop with the most DPAS and, among those, the fewest instructions (a
    k-loop versioned on bounds checks has a fast and a cold copy: the fast one is hot);
    without DPAS, the loop with the most sends. None for straight-line code."""
    best, best_key = None, None
    for a, b in loops(listing):
        m = mix(listing[a:b + 1])
        sends = m.block_loads + m.prefetches + m.block_stores + m.other_sends + m.spill_sends + m.private_sends
        key = (m.dpas, 0 if m.dpas else sends, -m.instructions)
        if best_key is None or key > best_key:
            best, best_key = m, key
    return best


def innermost_dpas_loop(listing: list[Instruction | str]) -> LoopMix | None:
    """The innermost loop with DPAS and the fewest instructions per DPAS (a loop nested in another
    -- attention's dk/dv loop inside its loop over heads -- and loops versioned on 2D block
    surface checks, with a fast and a cold copy); any innermost loop when none has DPAS."""
    spans = loops(listing)
    inner = [(a, b) for a, b in spans if not any(a < c and d <= b and (c, d) != (a, b) for c, d in spans)]
    mixes = [mix(listing[a:b + 1]) for a, b in inner]
    mixes = [m for m in mixes if m.dpas] or mixes
    return min(mixes, key=lambda m: (m.per_dpas or 1e9, -m.dpas)) if mixes else None
