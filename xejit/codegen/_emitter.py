"""LLVM IR → SPIR-V in a clean process for every module (the worker side; see ``spirv.py``).

Why: LLVM 22's SPIR-V backend keeps state across emissions in one process. Measured here:
74 of 200 alternating emissions of two small kernels in one process gave modules that spirv-val
rejects ("Id N is defined more than once"), and a second DPAS module can crash LLVM outright.
The same IR emitted in a fresh process is always valid.

So this worker (a plain script: it imports llvmlite and nothing of xejit) initialises LLVM once
and then, for each request, forks a child that emits one module and exits. Each emission starts
from the same never-used state at the cost of a fork (about a millisecond), and a crash or an
LLVM fatal error kills only that child and comes back as an error message.

Protocol on stdin/stdout, every message ``<u64 length><payload>``:
request ``ext1,ext2\\n<LLVM IR text>``; reply ``K<spv bytes>`` or ``E<error text>``. When the IR
text starts with the comment line ``;xejit-opt=<pipeline>`` (``O2``, ``O2-function``, or pass
names separated by commas), the child first runs that LLVM pipeline on the module (``xejit.codegen.compiler.optimize``
says which) and replies ``O<u64 optimisation ns><u64 n><n bytes of optimised IR text><spv bytes>``:
the compiler's process then never loads LLVM itself, and the worker's start-up overlaps its stages.
"""
from __future__ import annotations

import os
import re
import signal
import struct
import sys
import tempfile
import time

TRIPLE = "spirv64-unknown-unknown"


def _read_exact(f, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = f.read(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def read_message(f) -> bytes:
    (n,) = struct.unpack("<Q", _read_exact(f, 8))
    return _read_exact(f, n)


def write_message(f, payload: bytes) -> None:
    f.write(struct.pack("<Q", len(payload)) + payload)
    f.flush()


_OPT_PREFIX = ";xejit-opt="


def _optimize(llvm, ir_text: str, pipeline: str):
    """(module, its text) of ``ir_text`` after the LLVM pipeline ``pipeline`` (module docstring)."""
    mod = llvm.parse_assembly(ir_text)
    mod.verify()
    tm = llvm.Target.from_triple(TRIPLE).create_target_machine(opt=2)
    if pipeline in ("O2", "O2-function"):
        # O2 without vectorizers or unrolling: the device compiler does those
        pto = llvm.create_pipeline_tuning_options(speed_level=2)
        pto.loop_vectorization = False
        pto.slp_vectorization = False
        pto.loop_unrolling = False
        pb = llvm.create_pass_builder(tm, pto)
        if pipeline == "O2":
            pb.getModulePassManager().run(mod, pb)
        else:   # O2's function simplification pipeline on each definition
            fpm = pb.getFunctionPassManager()
            for f in mod.functions:
                if not f.is_declaration:
                    fpm.run(f, pb)
    else:
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=0))
        mpm = llvm.create_new_module_pass_manager()
        for name in pipeline.split(","):
            getattr(mpm, f"add_{name}_pass")()
        mpm.run(mod, pb)
    mod.verify()   # the optimised module is emitted from memory: checked as its text used to be
    # LLVM prints declarations without their parameters' names: drop them, so that the module
    # emitted from memory gives the same SPIR-V as its text (no OpName of declared parameters)
    for f in mod.functions:
        if f.is_declaration:
            for a in f.arguments:
                a.name = ""
    return mod, str(mod)


# `uitofp <N x i1>` / `sitofp <N x i1>` crash LLVM's SPIR-V backend ("VReg's low-level type and
# register class have different sizes" on an OpSelect with an i64 condition), and instcombine
# makes them from the selects the lowerings write instead (`(t.to(xl.int1).to(xl.float32)
# .to(xl.int32) % 3)` on dg2, found by tests/hostile): after the optimisation they become selects
# again, which the backend emits as OpSelect on the bool vector.
_BOOL_TO_FP = re.compile(r"^(\s*%[-\w.$]+) = (uitofp|sitofp) <(\d+) x i1> (%[-\w.$]+) to <\d+ x (float|half|double)>\s*$",
                         re.MULTILINE)
_FP_ONE = {("float", 1): "1.000000e+00", ("float", -1): "-1.000000e+00", ("double", 1): "1.000000e+00",
           ("double", -1): "-1.000000e+00", ("half", 1): "0xH3C00", ("half", -1): "0xHBC00"}


def _legalize_bool_to_float(text: str) -> str:
    """Bool-vector to float conversions as selects (see ``_BOOL_TO_FP``)."""
    def select(m: re.Match) -> str:
        res, op, n, cond, ty = m.groups()
        one = _FP_ONE[(ty, 1 if op == "uitofp" else -1)]
        return (f"{res} = select <{n} x i1> {cond}, <{n} x {ty}> splat ({ty} {one}), "
                f"<{n} x {ty}> zeroinitializer")
    return _BOOL_TO_FP.sub(select, text)


def _emit(llvm, ext: str, module) -> bytes:
    """The SPIR-V of ``module``: LLVM IR text (parsed and verified here) or an optimised ModuleRef."""
    llvm.set_option("", "--spirv-ext=" + ",".join("+" + e for e in ext.split(",") if e))
    # Modules with real 2D block IO: no loop strength reduction (the GPU compiler does its own).
    # LSR narrowed `ptrtoint(p) & 63` (the block base's misalignment) into a 32-bit ptrtoint that
    # the SPIR-V backend emits as a 64-bit OpConvertPtrToU feeding a 32-bit OpBitwiseAnd, which
    # spirv-val rejects. Modules for the CPU device keep LSR: without it the CPU runtime crashed
    # on an emulated dg2 int8 GEMM with M = 1 (tests/xegpu/test_gemm_device.py, slow set).
    # (The option is global, but each module is emitted in its own forked child.)
    # dg2's modules (DPAS, no 2D block IO) too: LSR turned the block reads' row addresses into
    # pointer phis, which IGC cannot promote to 32-bit stateful offsets (64-bit address
    # arithmetic, ~6 instructions, per read; benchmarks/bench_device_code.py).
    if "SPV_INTEL_2d_block_io" in ext or "SPV_INTEL_subgroup_matrix_multiply_accumulate" in ext:
        llvm.set_option("", "--disable-lsr")
    tm = llvm.Target.from_triple(TRIPLE).create_target_machine(opt=2)
    if isinstance(module, str):
        mod = llvm.parse_assembly(module)
        mod.verify()
    else:
        mod = module
    return bytes(tm.emit_object(mod))


def _child(llvm, request: bytes, wfd: int) -> None:
    ext, _, ir_text = request.partition(b"\n")
    try:
        text = ir_text.decode()
        if text.startswith(_OPT_PREFIX):
            pipeline, _, text = text[len(_OPT_PREFIX):].partition("\n")
            t0 = time.perf_counter_ns()
            mod, text = _optimize(llvm, text, pipeline)
            legal = _legalize_bool_to_float(text)
            opt_ns = time.perf_counter_ns() - t0
            llir = legal.encode()
            # the optimised module is emitted as is (a second parse of its text cost ~10% of the
            # emission of a dg2 GEMM) unless the legalisation rewrote its text
            reply = (b"O" + struct.pack("<QQ", opt_ns, len(llir)) + llir
                     + _emit(llvm, ext.decode(), mod if legal == text else legal))
        else:
            reply = b"K" + _emit(llvm, ext.decode(), text)
    except Exception as e:  # parse/verify/emission errors reported by llvmlite
        reply = b"E" + f"{type(e).__name__}: {e}".encode()
    with os.fdopen(wfd, "wb") as w:
        w.write(reply)
    os._exit(0)


def serve() -> None:
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            request = read_message(stdin)
        except EOFError:
            return
        rfd, wfd = os.pipe()
        err = tempfile.TemporaryFile()
        pid = os.fork()
        if pid == 0:
            os.close(rfd)
            os.dup2(err.fileno(), 2)  # LLVM's fatal errors go to stderr: keep them for the reply
            _child(llvm, request, wfd)
        os.close(wfd)
        with os.fdopen(rfd, "rb") as r:
            reply = r.read()
        _, status = os.waitpid(pid, 0)
        if not reply:
            err.seek(0)
            tail = err.read().decode(errors="replace").strip()[-2000:]
            how = (f"killed by {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
                   else f"exit status {os.WEXITSTATUS(status)}")
            reply = b"E" + f"LLVM's SPIR-V backend failed ({how}): {tail or 'no message'}".encode()
        err.close()
        write_message(stdout, reply)


if __name__ == "__main__":
    serve()
