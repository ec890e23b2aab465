"""Shared helpers of the XeGPU tests: compile a frontend kernel through the XeGPU path, run it on
the CPU device (DPAS / 2D block IO emulated), interpret xetile-sg and XeGPU IR."""
from __future__ import annotations

import subprocess
import sys

import numpy as np

from xejit.errors import SpirvValidationError
from xejit.codegen.spirv import to_spirv, validate
from xejit.device_launch import expand_args   # the ABI expansion kernel[grid] uses
from xejit.ir import Buffer, Interpreter
from xejit.ir.core import bf16_bits_to_f32, f32_to_bf16_bits

_EMIT_CHILD = ("import sys; from xejit.codegen.spirv import to_spirv; "
               "sys.stdout.buffer.write(to_spirv(sys.stdin.read(), sys.argv[1:]))")


def emit(module, extensions) -> bytes:
    """LLVM -> SPIR-V, spirv-val'd (retried in a fresh process on the backend's known
    duplicated-id bug after many emissions in one process)."""
    text = str(module)
    try:
        spv = to_spirv(text, extensions)
        validate(spv)
        return spv
    except SpirvValidationError as e:
        if "defined more than once" not in str(e):
            raise
    proc = subprocess.run([sys.executable, "-c", _EMIT_CHILD, *extensions], input=text.encode(),
                          capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    validate(proc.stdout)
    return proc.stdout


def sg_function(kernel, *args, **meta):
    """The subgroup-level XeTile function of a kernel launched with one subgroup."""
    fn = kernel.compile_ir(*args, num_subgroups=1, **meta).functions[0]
    fn.attributes["level"] = "subgroup"
    return fn


def interp_args(fn, arrays_and_scalars, bf16_args=()):
    out = []
    for a, v in zip(fn.args, arrays_and_scalars):
        t = a.type
        if hasattr(t, "rank"):
            out.append(Buffer(v, t.dtype))
        elif t.is_float:
            out.append(np.float32(v))
        else:
            out.append(np.int64(v))
    return out


def run_interp(fn, grid, args):
    Interpreter().run_grid(fn, grid, interp_args(fn, args))


def _emulated_build_options() -> str:
    """The emulation's build options, as device_launch passes them (none if the CPU runtime was
    loaded before xejit could configure it for them)."""
    from xejit.codegen import emulation
    from xejit.runtime import _icd
    return emulation.BUILD_OPTIONS if _icd.UNOPTIMISED_SUBGROUPS else ""


def lower_pipelined(sg_fn, target: str, emulate: bool, stages: int = 3) -> dict:
    """``lower_xegpu.lower`` after the passes compile_kernel runs before it (layouts, cooperative
    prefetch ``stages`` ahead, distribution, cleanups) on a one-subgroup kernel function."""
    from xejit.codegen import lower_xegpu
    from xejit.codegen.passes import cleanup, distribute_to_subgroups, pipelining, propagate_layouts
    from xejit.codegen.targets import get_target
    wg = pipelining.run(propagate_layouts(sg_fn), stages, get_target(target))
    return lower_xegpu.lower(cleanup(distribute_to_subgroups(wg)), target, {"emulate": emulate})


def run_device(res, grid, args, target_sg):
    """Launch a lowered kernel (``lower_xegpu.lower`` result) on the CPU device."""
    from xejit.runtime import build_program
    spv = emit(res["module"], res["extensions"])
    # only emulated kernels run on the CPU device: built as XEJIT_EMULATE launches build them
    k = build_program(spv, options=_emulated_build_options()).kernel(res["xegpu_fn"].name, res["signature"])
    block = [target_sg] + [1] * (len(grid) - 1)
    k.launch(tuple(grid), tuple(block), *expand_args(res["arg_plan"], list(args)))
    return spv


# ---------------------------------------------------------------------------------------------
# GEMM cases
# ---------------------------------------------------------------------------------------------

NP_OF = {"bf16": np.uint16, "f16": np.float16, "f32": np.float32, "i8": np.int8, "u8": np.uint8}


def _torch_like(arr: np.ndarray, dtype: str):
    """A torch tensor with the dtype/layout of ``arr`` (specialization only; bf16 needs torch)."""
    import torch
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "i8": torch.int8,
           "u8": torch.uint8, "i32": torch.int32}[dtype]
    if arr.flags.c_contiguous:
        return torch.empty(arr.shape, dtype=tdt)
    return torch.empty(arr.shape[::-1], dtype=tdt).t()


def random_operand(rng, shape, dtype: str, colmajor=False):
    """(memory array, float64 value) with random non-zero entries."""
    if dtype in ("i8", "u8"):
        lo = -8 if dtype == "i8" else 1
        x = rng.integers(lo, 9, shape)
        x[x == 0] = 3
        mem = x.astype(NP_OF[dtype])
        val = x.astype(np.float64)
    else:
        x = rng.uniform(0.1, 1.0, shape) * rng.choice([-1, 1], shape)
        if dtype == "bf16":
            mem = f32_to_bf16_bits(x.astype(np.float32))
            val = bf16_bits_to_f32(mem).astype(np.float64)
        else:
            mem = x.astype(NP_OF[dtype])
            val = mem.astype(np.float64)
    if colmajor:
        mem = np.asfortranarray(mem)
    return mem, val


def gemm_case(kernel, dtype: str, M, N, K, BM, BN, BK, *, b_colmajor=False, c_dtype=None, seed=0):
    """Inputs, poisoned output, reference and the sg-level IR of one GEMM."""
    rng = np.random.default_rng(seed)
    a, av = random_operand(rng, (M, K), dtype)
    b, bv = random_operand(rng, (K, N), dtype, colmajor=b_colmajor)
    c_dtype = c_dtype or ("i32" if dtype in ("i8", "u8") else "f32")
    c = np.full((M, N), -12345 if c_dtype == "i32" else np.nan,
                dtype=np.int32 if c_dtype == "i32" else NP_OF[c_dtype])
    meta = dict(BM=BM, BN=BN, BK=BK)
    if dtype == "f32":
        meta["PREC"] = "tf32"
    like = [_torch_like(a, dtype), _torch_like(b, dtype), _torch_like(c, c_dtype)] \
        if "bf16" in (dtype, c_dtype) else [a, b, c]
    fn = sg_function(kernel, *like, M, N, K, **meta)
    return dict(a=a, b=b, c=c, ref=av @ bv, fn=fn, args=[a, b, c, M, N, K],
                grid=(-(-M // BM), -(-N // BN)), dtype=dtype, c_dtype=c_dtype)


def check_result(case, tol):
    c, ref = case["c"], case["ref"]
    if case["c_dtype"] == "i32":
        assert (c == -12345).sum() == 0 or (ref == -12345).any(), "unwritten outputs"
        np.testing.assert_array_equal(c, ref.astype(np.int64))
        return
    got = bf16_bits_to_f32(c).astype(np.float64) if case["c_dtype"] == "bf16" else c.astype(np.float64)
    assert not np.isnan(got).any(), f"{np.isnan(got).sum()} outputs not written"
    err = np.abs(got - ref) / (np.abs(ref).max() + 1e-30)
    assert err.max() <= tol, f"max relative error {err.max():.3g} > {tol}"


def run_compiled(ck, grid, args):
    """Launch a ``compile_kernel`` result on the CPU device."""
    from xejit.runtime import build_program
    options = ck.build_options("opencl") if ck.options.get("emulate") else ""
    k = build_program(ck.spv, options=options if _emulated_build_options() else "").kernel(ck.name, ck.signature)
    k.launch(tuple(grid), ck.block(len(grid)), *expand_args(ck.arg_plan, list(args)))
