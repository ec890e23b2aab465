"""The compiler driver: XeTile IR -> SPIR-V through named, timed, dumpable stages.

Stages (docs/compiler.md): ``xetile`` (frontend IR) -> ``layout`` (propagate_layouts) ->
``xetile-sg`` (distribute_to_subgroups + cleanup) -> ``llir`` (generic lowering, or the XeGPU
path for targets with DPAS) -> ``spv`` (LLVM SPIR-V backend, then spirv-val) -> for Intel GPU
targets, ``zebin`` and ``isa`` (Intel's compiler, :mod:`xejit.codegen.intel_compiler`: built on
first use, or at once for ``grf_mode="auto"`` and under ``XEJIT_DEVICE_BUILD=1``).
``XEJIT_DUMP=<dir>`` writes each stage to ``<dir>/<kernel>.<stage>``.

Example:
    >>> from xejit.ir.core import Builder, Function
    >>> fn = Function("noop", [], [], {"num_subgroups": 1})
    >>> _ = Builder.at_end(fn.entry).create("func.return")
    >>> ck = compile_kernel(fn, "generic")
    >>> ck.signature, ck.workgroup_size
    ((), (16, 1, 1))
"""
from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from llvmlite import ir

from .. import options
from ..ir.core import Function, Module, VectorType
from ..ir.printer import print_function
from ..ir.verifier import verify_function
from . import builtins as bi
from . import emulation, intel_compiler, lower_xegpu, spirv
from .lower_generic import lower as lower_generic
from .abi import kernel_abi
from .passes import (CompilerError, cleanup, clone_function, distribute_to_subgroups, pipelining,
                     propagate_layouts)
from .targets import Target, get_target

__all__ = ["compile_kernel", "CompiledKernel", "CompilerError", "kernel_abi"]


class _Asm(dict):
    """The stages' text/bytes by name; ``lazy`` stages (``spvasm``; ``zebin`` and ``isa`` from
    Intel's compiler) are made on first access."""

    def __init__(self):
        super().__init__()
        self.lazy: dict[str, Callable[[], Any]] = {}

    def __missing__(self, key):
        if key in self.lazy:
            self[key] = self.lazy[key]()
            return self[key]
        raise KeyError(key)

    def __contains__(self, key):
        return super().__contains__(key) or key in self.lazy

    def keys(self):
        return list(dict.keys(self)) + [k for k in self.lazy if not dict.__contains__(self, k)]


@dataclass
class CompiledKernel:
    """The result of :func:`compile_kernel`."""
    name: str
    target: Target
    asm: _Asm
    signature: tuple[str, ...]
    arg_plan: list[tuple[int, str, str]]
    workgroup_size: tuple[int, int, int]
    num_subgroups: int
    timings: dict[str, float]
    path: str
    instructions: Counter = field(default_factory=Counter)
    fallbacks: list[str] = field(default_factory=list)
    regs_bytes_per_lane: int = 0
    slm_bytes: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    #: The register-file mode the module is built with (``"default"`` or ``"256"``; ``"auto"``
    #: resolved) and why.
    grf_mode: str = "default"
    grf_reason: str = ""
    binary_cache: Any = field(default=None, repr=False)
    #: ``debug=True`` (XEJIT_DEBUG=1): the checked gather/scatter sites, in the numbering of the
    #: hidden report argument (codegen/bounds_debug.py); None otherwise
    debug_sites: list[dict] | None = None
    _binary: "intel_compiler.DeviceBinary | None" = field(default=None, repr=False)

    @property
    def spv(self) -> bytes:
        return self.asm["spv"]

    @property
    def has_device_binary(self) -> bool:
        """Whether Intel's compiler can build this kernel (an Intel GPU target, not emulated)."""
        return self.target.ocloc_device is not None and not self.options.get("emulate")

    @property
    def device_binary(self) -> "intel_compiler.DeviceBinary":
        """What Intel's compiler made of the SPIR-V for this target and ``grf_mode`` (built on
        first use; ``ToolchainMissingError`` without the toolchain)."""
        if self._binary is None:
            if not self.has_device_binary:
                why = "emulated on the CPU device" if self.options.get("emulate") else "not an Intel GPU"
                raise ValueError(f"kernel {self.name}: target {self.target.name} is {why}; "
                                 "Intel's GPU compiler has nothing to build")
            self._binary = intel_compiler.compile_spirv(self.spv, self.target, self.grf_mode, self.binary_cache)
        return self._binary

    def build_options(self, api: str) -> str:
        """The program-build options the runtime passes for this kernel through ``api``
        (``"level_zero"`` or ``"opencl"``): the large register file when ``grf_mode`` is 256;
        an emulated kernel's (CPU device) are ``emulation.BUILD_OPTIONS``."""
        if self.options.get("emulate"):
            return emulation.BUILD_OPTIONS
        rf = self.target.registers
        return rf.build_options(self.grf_mode, api) if rf is not None else ""

    def block(self, grid_rank: int) -> tuple[int, ...]:
        """The workgroup size for a grid of ``grid_rank`` axes (runtime launch's ``block``)."""
        return self.workgroup_size[:max(1, grid_rank)]

    def estimated_registers(self, measured_spill: int | None = None) -> str:
        """The static estimate of the registers the subgroup's live tiles take. It counts each
        tile whole, so it is an upper bound where the lowering streams a tile's K-blocks: with
        ``measured_spill`` (Intel's compiler's figure) a 0 says so instead of predicting spills."""
        sg = self.target.subgroup_size
        total = self.regs_bytes_per_lane * sg
        rf = self.target.registers
        if rf is None:
            return (f"~{self.regs_bytes_per_lane} B of live tile data per lane ({total} B per subgroup); "
                    f"target {self.target.name!r} has no register-file data")
        grf = rf.large_grf_count if self.grf_mode == "256" and rf.large_grf_count else rf.count
        need = -(-total // rf.bytes_each)
        text = f"~{total} B of tile data per subgroup = {need} of {grf} registers ({rf.bytes_each} B each)"
        if need > grf and measured_spill == 0:
            text += ("; above the register file as counted (each tile whole), yet Intel's compiler "
                     "spills nothing (figures below)")
        elif need > grf:
            text += "; EXCEEDS the register file: expect spills"
            if rf.large_grf_count and grf < rf.large_grf_count and need <= rf.large_grf_count:
                text += f" (grf_mode='256' gives {rf.large_grf_count})"
        return text

    def report(self) -> str:
        lines = [f"kernel {self.name} for target {self.target.name} ({self.path} path), "
                 f"{self.num_subgroups} subgroup(s) x {self.target.subgroup_size} lanes, "
                 f"workgroup {self.workgroup_size}",
                 "instructions chosen:"]
        lines += [f"  {n:6d}  {k}" for k, n in sorted(self.instructions.items())] or ["  (none)"]
        lines.append("fallbacks:")
        lines += [f"  {f}" for f in self.fallbacks] or ["  none"]
        lines.append(f"registers: {self.estimated_registers(self._measured_spill())}")
        if self.slm_bytes:
            lines.append(f"SLM: {self.slm_bytes} B per workgroup")
        lines += self._device_report()
        lines.append("stage times: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in self.timings.items()))
        return "\n".join(lines)

    def _measured_spill(self) -> int | None:
        """Intel's compiler's spill bytes, or None where it has not built / cannot build this kernel."""
        if not self.has_device_binary or (self._binary is None and intel_compiler.find_toolchain() is None):
            return None
        return self.device_binary.spill_bytes

    def _device_report(self) -> list[str]:
        if not self.has_device_binary:
            return []
        head = f"grf_mode: {self.grf_mode}" + (f" ({self.grf_reason})" if self.grf_reason else "")
        if self._binary is None and intel_compiler.find_toolchain() is None:
            return [head, "Intel GPU compiler: not installed (python -m xejit toolchain install); "
                          "no register, spill or ISA figures"]
        b = self.device_binary
        lines = [head, f"Intel GPU compiler ({b.toolchain}), device {b.device}"
                       + (f", options {b.options!r}" if b.options else "") + f": {b.summary()}",
                 f"hot loop: {b.hot_loop_text()}"]
        if b.spill_bytes:
            lines.append(f"  SPILLS {b.spill_bytes} B per thread"
                         + ("; grf_mode='256' or 'auto' may avoid it" if self.grf_mode == "default"
                            and self.target.registers and self.target.registers.large_grf_count else ""))
        others = [m for m in b.dpas_loops if m != b.hot_loop]
        if others:
            lines.append("other loops with DPAS (versions for boundary tiles): " + "; ".join(
                f"{m.instructions} instructions, {m.per_dpas} per DPAS" for m in others))
        return lines


def _live_tile_bytes(fn: Function, lanes: int, packed: bool) -> int:
    """Per-lane bytes of tile data live in the innermost loop (or in the whole kernel).

    A loop's carried values and the values its body makes count once (a yielded value takes the
    place of its block argument). ``packed``: 8/16-bit data stays packed in registers (DPAS
    operands); otherwise the generic lowering holds every element in 32 bits.
    """
    def per_lane(t) -> int:
        if not isinstance(t, VectorType) or len(t.shape) != 2:
            return 0
        r, c = t.shape
        return r * -(-c // lanes) * (t.dtype.itemsize if packed else max(4, t.dtype.itemsize))

    best = 0
    loops = [op for op in fn.walk() if op.name == "scf.for"]
    for op in loops:
        body = op.regions[0].block
        yielded = {id(v) for v in body.terminator.operands} if body.terminator is not None else set()
        total = sum(per_lane(a.type) for a in body.args)
        total += sum(per_lane(r.type) for o in body.ops for r in o.results if id(r) not in yielded)
        best = max(best, total)
    if not loops:
        best = sum(per_lane(r.type) for o in fn.walk() for r in o.results)
    return best


_llvm_ready = False


#: The passes the generic lowering's IR needs: its allocas promoted (sroa), the address arithmetic
#: llvmlite's IRBuilder emits separately combined and shared (instcombine, GVN), branches on
#: constants folded (simplifycfg), dead code dropped. Measured on the GEMM (8x32x8, 2 subgroups,
#: 512^3 on the CPU device): 49 ms instead of O2's 118-168 ms, SPIR-V within 2% of O2's size, the
#: same driver build time and run time, bit-identical results. The CPU driver optimises again
#: (it is LLVM at O2/O3 itself), so the loop passes of O2 only cost compile time here.
GENERIC_PASSES = ("sroa", "instruction_combine", "simplify_cfg", "new_gvn", "dead_code_elimination")


def optimize(llmod, level: int = 2, passes: tuple[str, ...] | None = None):
    """Run LLVM's middle-end on an llvmlite module; returns a ModuleRef.

    Default: O2 without vectorizers. llvmlite's IRBuilder emits every address computation
    separately; without this the driver spends seconds compiling redundant code. Vectorizers stay
    off: the device compiler vectorizes across lanes itself. ``passes`` (names of llvmlite's
    ``ModulePassManager.add_<name>_pass``) runs just those instead, in order (:data:`GENERIC_PASSES`).
    """
    import llvmlite.binding as llvm

    global _llvm_ready
    if not _llvm_ready:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _llvm_ready = True
    ref = llvm.parse_assembly(str(llmod))
    ref.verify()
    tm = llvm.Target.from_triple(spirv.TRIPLE).create_target_machine(opt=level)
    if passes is not None:
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=0))
        mpm = llvm.create_new_module_pass_manager()
        for name in passes:
            getattr(mpm, f"add_{name}_pass")()
        mpm.run(ref, pb)
        return ref
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pto.loop_vectorization = False
    pto.slp_vectorization = False
    pto.loop_unrolling = False
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(ref, pb)
    return ref


class _Stages:
    def __init__(self, name: str):
        self.name = name
        self.timings: dict[str, float] = {}
        self.dump = options.current().dump
        if self.dump:
            os.makedirs(self.dump, exist_ok=True)

    def run(self, stage: str, f: Callable, *args):
        t0 = time.perf_counter()
        out = f(*args)
        self.timings[stage] = self.timings.get(stage, 0.0) + time.perf_counter() - t0
        return out

    def write(self, stage: str, data) -> None:
        if not self.dump:
            return
        path = os.path.join(self.dump, f"{self.name}.{stage}")
        if isinstance(data, bytes):
            with open(path, "wb") as fh:
                fh.write(data)
        else:
            with open(path, "w") as fh:
                fh.write(str(data))


def _verified(fn: Function, stage: str) -> Function:
    """Verify the IR after ``stage``; layouts the user gave may contradict the rules only now that
    every value has one, so the message is the verifier's (with the op's source line)."""
    try:
        verify_function(fn)
    except Exception as e:
        raise CompilerError(f"after {stage}: {e}") from e
    return fn


#: Elements of one tile or vector value per subgroup that xejit compiles. Compile time grows with
#: it (generic, measured: 8192 elements 5 s, 32768 elements 21 s, 65536 elements 52 s) and even
#: the large register file of pvc holds 4096 f32 per subgroup: beyond this a kernel is refused
#: up front instead of compiling for minutes (or forever: a 2^40-row tile).
MAX_ELEMENTS_PER_SUBGROUP = 16384


def _check_sizes(sg: Function, tgt: Target) -> None:
    """A CompilerError at the first value whose per-subgroup tile exceeds the limit above."""
    for op in sg.walk():
        if op.name == "gpu.slm_alloc":     # shared memory, checked against the target by _check_slm
            continue
        for v in op.results:
            shape = getattr(v.type, "shape", None)
            if not shape:
                continue
            n = 1
            for d in shape:
                n *= int(d)
            if n > MAX_ELEMENTS_PER_SUBGROUP:
                rf = tgt.registers
                room = (f"; the register file of {tgt.name} holds {rf.bytes_total * (rf.large_grf_count or rf.count) // rf.count // 4} "
                        f"32-bit values per subgroup" if rf else "")
                raise CompilerError(
                    f"a {'x'.join(map(str, shape))} value is {n} elements per subgroup; xejit compiles at most "
                    f"{MAX_ELEMENTS_PER_SUBGROUP} per value{room}. Use smaller tiles, more subgroups "
                    f"(num_subgroups) or more programs", op)


def _check_slm(sg: Function, tgt: Target) -> int:
    """Bytes of shared local memory the kernel's SLM exchanges allocate (``gpu.slm_alloc``; the
    generic lowering keeps floats as f32) -- a CompilerError naming the buffers when they exceed
    the target's SLM (a driver would fail to build or launch it)."""
    allocs = [op for op in sg.walk() if op.name == "gpu.slm_alloc"]
    total = 0
    for op in allocs:
        t = op.result.type
        eb = 4 if (tgt.dpas is None and t.dtype.is_float) else t.dtype.itemsize
        total += t.shape[0] * t.shape[1] * eb
    if tgt.slm_bytes is not None and total > tgt.slm_bytes:
        what = "; ".join(f"{op.loc}: {op.result.type}" for op in allocs)
        raise CompilerError(f"the kernel needs {total} B of shared local memory for data moved between "
                            f"subgroups, {tgt.name} has {tgt.slm_bytes} B per workgroup ({what}); use "
                            f"smaller tiles or layouts that keep the data in its subgroup")
    return total


def _workgroup_bytes(module) -> int:
    """Bytes of the workgroup (SLM) arrays in a lowered LLVM module: the IR's ``gpu.slm_alloc``
    buffers and the ones a lowering adds for itself (dg2's staged B panels and decode's staged A,
    ``builtins.slm_array``), which the IR does not show."""
    def size(t) -> int:
        if isinstance(t, (ir.ArrayType, ir.VectorType)):
            return t.count * size(t.element)
        if isinstance(t, ir.IntType):
            return (t.width + 7) // 8
        return {ir.HalfType: 2, ir.FloatType: 4, ir.DoubleType: 8}[type(t)]
    return sum(size(g.value_type) for g in module.global_values
               if isinstance(g, ir.GlobalVariable) and g.addrspace == bi.LOCAL_AS)


def _estimated_grf_mode(tgt: Target, regs_bytes_per_lane: int) -> tuple[str, str]:
    """``grf_mode="auto"`` without Intel's compiler: the large register file when the tile data
    alone would not fit the default one."""
    rf = tgt.registers
    need = -(-regs_bytes_per_lane * tgt.subgroup_size // rf.bytes_each)
    if rf.large_grf_count and need > rf.count:
        return "256", f"auto, by estimate: ~{need} registers of tile data > {rf.count} (Intel's compiler not installed)"
    return "default", f"auto, by estimate: ~{need} registers of tile data (Intel's compiler not installed)"


def device_build_required() -> bool:
    """``XEJIT_DEVICE_BUILD=1``: every module compiled for an Intel GPU target also goes through
    Intel's compiler at once, and a module it rejects is an error of the compile."""
    return options.current().device_build


def compile_kernel(fn: Function | Module, target: str | Target, *, num_subgroups: int | None = None,
                   num_stages: int = 3, grf_mode: str = "default", emulate: bool = False,
                   binary_cache: Any = None, debug: bool = False, addresses: bool = False,
                   _span_checks: bool = True) -> CompiledKernel:
    """Compile one XeTile kernel for ``target``; with ``XEJIT_VALIDATE=1`` (set by the test suite)
    every SPIR-V module is checked by spirv-val before it is returned.

    The path is chosen from target data: a target with DPAS goes through the XeGPU lowering
    (``xejit.codegen.lower_xegpu.lower``), any other through :mod:`xejit.codegen.lower_generic`.
    For Intel GPU targets ``grf_mode="auto"`` is resolved here by Intel's compiler (the default
    register file unless it spills), or by the register estimate when the compiler is not
    installed. ``binary_cache`` (``get``/``put`` of bytes) keeps Intel's compiler's binaries.
    ``debug`` (what a launch passes under ``XEJIT_DEBUG=1``): gathers and scatters report an
    out-of-range offset through a hidden last argument (``CompiledKernel.debug_sites``,
    :mod:`xejit.codegen.bounds_debug`). ``_span_checks=False`` compiles gathers and scatters
    without their bounds check -- memory-unsafe, for ``benchmarks/bench_gather_bounds.py`` only.
    ``addresses`` (a launch on a device with system USM allocations): the generic lowering takes
    arrays as 64-bit addresses ("addr" kinds, codegen/abi.py), so host arrays need no copy; the
    XeGPU lowering keeps pointer arguments (its signature tells the launcher which it got).
    """
    spirv.prestart_emitter()   # its start-up (~0.15 s) overlaps the stages before emission
    if isinstance(fn, Module):
        fn = fn.functions[0]
    tgt = get_target(target) if isinstance(target, str) else target
    fn = clone_function(fn)
    nsg = num_subgroups or fn.attributes.get("num_subgroups") or 1
    fn.attributes["num_subgroups"] = nsg
    st = _Stages(fn.name)
    asm = _Asm()
    asm["xetile"] = print_function(fn)
    st.write("xetile", asm["xetile"])

    wg = st.run("layout", propagate_layouts, fn)
    wg = _verified(wg, "layout propagation")
    asm["xetile-layout"] = print_function(wg)
    st.write("xetile-layout", asm["xetile-layout"])
    if tgt.block_io is not None and num_stages >= 1:   # cooperative prefetch (pvc, bmg, lnl)
        wg = st.run("pipelining", pipelining.run, wg, num_stages, tgt)
        wg = _verified(wg, "software pipelining")
    sg = st.run("wg_to_sg", distribute_to_subgroups, wg)
    sg = st.run("cleanup", cleanup, sg)
    sg = _verified(sg, "wg_to_sg distribution")
    asm["xetile-sg"] = print_function(sg)
    st.write("xetile-sg", asm["xetile-sg"])

    _check_sizes(sg, tgt)
    _check_slm(sg, tgt)   # the IR's buffers against the target, before lowering
    lanes = tgt.subgroup_size
    options = {"num_stages": num_stages, "grf_mode": grf_mode, "emulate": emulate, "debug": debug}
    debug_sites = None
    # only kernels with gathers or scatters have something to report (and a hidden argument)
    debug = debug and any(op.name in ("xetile.load_gather", "xetile.store_scatter") for op in sg.walk())
    instructions: Counter = Counter()
    fallbacks: list[str] = []
    if tgt.has_dpas:
        path = "xegpu"
        hook = lower_xegpu.lower
        ctx = {"num_subgroups": nsg, "num_stages": num_stages, "grf_mode": grf_mode, "emulate": emulate,
               "timings": st.timings, "dump": st.write, "debug": debug, "span_checks": _span_checks}
        res = st.run("xegpu", hook, sg, tgt, ctx)
        get = (lambda k, d=None: res.get(k, d)) if isinstance(res, dict) else (lambda k, d=None: getattr(res, k, d))
        if get("xegpu") is not None:
            asm["xegpu"] = str(get("xegpu"))
            st.write("xegpu", asm["xegpu"])
        llmod = get("module")
        extensions = tuple(get("extensions", tgt.spirv_extensions))
        kinds, plan = get("signature"), get("arg_plan")
        if kinds is None or plan is None:
            kinds, plan = kernel_abi(sg)
        instructions.update(get("instructions", {}) or {})
        fallbacks += list(get("fallbacks", []) or [])
        debug_sites = get("debug_sites")
        if debug and debug_sites is None:
            raise CompilerError(f"the XeGPU lowering of {tgt.name!r} does not support XEJIT_DEBUG=1")
    else:
        path = "generic"
        lw = st.run("lower", lower_generic, sg, tgt, nsg, debug, _span_checks, addresses)
        debug_sites = lw.debug_sites
        llmod, extensions = lw.module, tgt.spirv_extensions
        kinds, plan = lw.arg_kinds, lw.arg_plan
        instructions, fallbacks = lw.report.instructions, lw.report.fallbacks
    st.write("llir-unoptimized", llmod)
    # optimised and emitted in the emission worker (no LLVM in this process); its optimisation
    # time is reported as llvm-opt, the rest (printing the IR, emission) as spirv
    t0 = time.perf_counter()
    llir, spv, opt_s = spirv.optimize_and_emit(
        llmod, extensions, ",".join(GENERIC_PASSES) if path == "generic" else tgt.llvm_pipeline)
    st.timings["llvm-opt"] = opt_s
    st.timings["spirv"] = time.perf_counter() - t0 - opt_s
    asm["llir"] = llir
    st.write("llir", asm["llir"])
    if spirv.validation_enabled():   # XEJIT_VALIDATE=1 (the test suite sets it)
        st.run("spirv-val", spirv.validate, spv)
    asm["spv"] = spv
    st.write("spv", spv)
    asm.lazy["spvasm"] = lambda: spirv.disassemble(spv)
    if st.dump:
        st.write("spvasm", asm["spvasm"])
    ck = CompiledKernel(
        name=fn.name, target=tgt, asm=asm, signature=tuple(kinds), arg_plan=list(plan),
        workgroup_size=(nsg * lanes, 1, 1), num_subgroups=nsg, timings=st.timings, path=path,
        instructions=instructions, fallbacks=fallbacks, regs_bytes_per_lane=_live_tile_bytes(sg, lanes, packed=tgt.dpas is not None),
        slm_bytes=_workgroup_bytes(llmod), options=options, binary_cache=binary_cache, debug_sites=debug_sites)
    if not ck.has_device_binary:
        ck.grf_mode = "default" if grf_mode == "auto" else grf_mode
        return ck
    asm.lazy["zebin"] = lambda: ck.device_binary.zebin
    asm.lazy["isa"] = lambda: ck.device_binary.isa
    if grf_mode == "auto":
        if intel_compiler.find_toolchain() is not None:
            ck._binary, why = st.run("intel-compiler", intel_compiler.choose_grf_mode, spv, tgt, binary_cache)
            ck.grf_mode, ck.grf_reason = ck._binary.grf_mode, f"auto: {why}"
        else:
            ck.grf_mode, ck.grf_reason = _estimated_grf_mode(tgt, ck.regs_bytes_per_lane)
    else:
        ck.grf_mode = grf_mode
    if ck._binary is None and (device_build_required() or (st.dump and intel_compiler.find_toolchain())):
        ck._binary = st.run("intel-compiler", lambda: ck.device_binary)
    if st.dump and ck._binary is not None:
        st.write("zebin", ck._binary.zebin)
        st.write("isa", ck._binary.isa)
    return ck
