"""The device path of ``kernel[grid](...)``: compile (cached) and launch on a dpctl device.

``compile_and_launch(kernel, module, grid, args, options)`` is what ``xejit.jit._compile_and_launch``
calls. Compiled SPIR-V and its ABI are cached in :func:`xejit.runtime.cache.default_cache` under
a key of the kernel source hash, the specialization, the target, the options and the versions of
xejit and llvmlite; built programs are cached per process by the runtime.

The target is the device's (``generic`` on the CPU device) unless ``XEJIT_EMULATE=<target>``
asks for an emulated DPAS target. ``XEJIT_DEBUG=1`` builds and caches separate kernels whose
gathers and scatters report an out-of-range offset (``codegen/bounds_debug.py``): the launch then
raises ``xejit.errors.OutOfBoundsError``.
"""
from __future__ import annotations

import hashlib
import pathlib
import binascii
import re
import base64
import json
from typing import Any

import numpy as np

from . import options
from .options import current as current_options
from .codegen import bounds_debug, lower_generic
from .codegen.compiler import compile_kernel
from .errors import ArgumentError
from .errors import XejitValueError
from .ir.core import Module
from . import launch_plan
from ._version import __version__
from .arguments import array_facts
from .codegen.spirv import structure_problem
from .codegen.targets import TARGETS
from .errors import ArgumentValueError
from .runtime import build_program, default_cache
from .runtime._icd import UNOPTIMISED_SUBGROUPS
from .runtime.cache import key_of
from .runtime.device import default_device, device_for_queue
from .runtime.launch import ARG_KINDS, _usm_owner, usm_memory
from .runtime.usm_array import UsmArray

_memo: dict[str, tuple[Any, tuple, list, tuple]] = {}
_debug_sites: dict[int, list] = {}   # id(runtime kernel) -> its checked sites (XEJIT_DEBUG=1; kept alive by _memo)
_fast: dict[tuple, tuple[Module, tuple[Any, tuple, list, tuple]]] = {}


def _versions() -> tuple[str, str]:
    import llvmlite

    return __version__, llvmlite.__version__


_compiler_hash: str | None = None


def compiler_hash() -> str:
    """A hash of the compiler's own sources (xejit/codegen, xejit/ir), so that a changed compiler
    never reuses SPIR-V from the disk cache (the version number alone does not change in development)."""
    global _compiler_hash
    if _compiler_hash is None:
        h = hashlib.sha256()
        root = pathlib.Path(__file__).parent
        for sub in ("codegen", "ir"):
            for p in sorted((root / sub).rglob("*.py")):
                h.update(p.read_bytes())
        _compiler_hash = h.hexdigest()[:16]
    return _compiler_hash


def cache_key(kernel, module: Module, target: str, options: dict, emulate: bool) -> str:
    # a debug build's entry holds its sites' source paths (its error messages name and quote the
    # line): the same source in another checkout is another entry
    files = sorted({op.loc.file for fn in module.functions for op in fn.walk()}) if options.get("debug") else None
    return key_of("xejit-spv-v2", getattr(kernel, "source_hash", module.functions[0].name),
                  module.attributes.get("specialization"), target, tuple(sorted(options.items())),
                  emulate, *_versions(), compiler_hash(),
                  # the generic lowering sizes register strips by the CPU's vector registers
                  lower_generic.VECTOR_REGS, lower_generic.VECTOR_BYTES, files)


def emulated_target() -> str | None:
    """The target ``XEJIT_EMULATE`` names (None when unset or empty); an unknown name is a
    ValueError listing the known targets, before anything is compiled."""
    name = options.current().emulate
    if not name:
        return None
    if name.lower() not in TARGETS:
        raise XejitValueError(f"XEJIT_EMULATE={name!r} names no target; known targets: {', '.join(TARGETS)}")
    return name


def resolve_target(device=None) -> tuple[str, bool]:
    """(target name, emulated?) that a compile or launch uses -- the one place that decides it:
    the target ``XEJIT_EMULATE`` names, emulated on the CPU device, else ``device``'s (default:
    the current device) natively. Launches, ``Kernel.compile`` and the autotuner all ask here."""
    name = emulated_target()
    if name:
        return name, True
    return (device or default_device()).target, False


def compiled(kernel, module: Module, options: dict, device=None):
    """(runtime kernel, signature, arg plan, workgroup size) for ``module`` on ``device``."""

    device = device or default_device()
    target, emulated = resolve_target(device)
    if bounds_debug.debug_enabled():   # a separate build: part of every cache key below
        options = {**options, "debug": True}
    if device.system_memory and current_options().host_arrays != "copy":
        # arrays as addresses (codegen/abi.py), host arrays without a copy: part of every cache key below
        options = {**options, "addresses": True}
    # Fast path for repeated launches: the jit keeps one Module object per specialization, so
    # its identity (checked, not just its id) stands for the specialization without hashing.
    fast_key = (id(module), target, emulated, device, tuple(sorted(options.items())))
    hit = _fast.get(fast_key)
    if hit is not None and hit[0] is module:
        return hit[1]
    key = cache_key(kernel, module, target, options, emulated)
    got = _memo.get((key, device))
    if got is not None:
        _fast[fast_key] = (module, got)
        return got
    cache = default_cache()
    blob = cache.get(key)
    meta, spv = usable_entry(blob, len(module.functions[0].args)) if blob is not None else (None, None)
    if blob is not None and meta is None:
        cache.discard(key)   # an entry this code cannot use is a miss: rebuilt and replaced below
    if meta is None:
        ck = compile_kernel(module, target, num_subgroups=options.get("num_subgroups"),
                            num_stages=options.get("num_stages", 3),
                            grf_mode=options.get("grf_mode", "default"), emulate=emulated,
                            binary_cache=cache, debug=bool(options.get("debug")),
                            addresses=bool(options.get("addresses")))
        spv = ck.spv
        meta = {"spv": base64.b64encode(spv).decode(), "name": ck.name, "signature": list(ck.signature),
                "arg_plan": [list(p) for p in ck.arg_plan], "workgroup_size": list(ck.workgroup_size),
                # grf_mode="auto" is resolved at compile time; the driver gets the chosen mode's option.
                "build_options": ck.build_options(device.backend)}
        if ck.debug_sites is not None:
            meta["debug_sites"] = ck.debug_sites
        cache.put(key, json.dumps(meta).encode())
    build_options = meta.get("build_options", "")
    if emulated and not UNOPTIMISED_SUBGROUPS:
        build_options = ""   # the runtime loaded before xejit could configure it: the optimising build
    prog = build_program(spv, device, validate=False,  # compile_kernel validated it
                         options=build_options)
    rk = prog.kernel(meta["name"], tuple(meta["signature"]))
    got = (rk, tuple(meta["signature"]), [tuple(p) for p in meta["arg_plan"]], tuple(meta["workgroup_size"]))
    if "debug_sites" in meta:
        _debug_sites[id(rk)] = meta["debug_sites"]
    _memo[(key, device)] = got
    _fast[fast_key] = (module, got)
    return got


def usable_entry(blob: bytes, num_args: int) -> tuple[dict, bytes] | tuple[None, None]:
    """(metadata, SPIR-V) of a compile-cache entry, or (None, None) when it cannot be used.

    The cache's checksum proves the bytes are the ones written, not that they are what this code
    expects (an older format under the same key, a hand-made copy): the JSON structure, the ABI
    fields (argument kinds, an argument plan over ``num_args`` runtime arguments, the workgroup
    size), strict base64 and the SPIR-V itself (magic number, whole instruction stream, the
    entry point named in the entry) are checked here, so nothing malformed reaches the driver."""

    try:
        meta = json.loads(blob.decode("utf-8"))
        if not isinstance(meta, dict) or not isinstance(meta.get("spv"), str):
            return None, None
        name, sig, plan, wg = meta.get("name"), meta.get("signature"), meta.get("arg_plan"), meta.get("workgroup_size")
        if not (isinstance(name, str) and name and isinstance(sig, list) and isinstance(plan, list)
                and isinstance(wg, list) and len(plan) == len(sig) and 1 <= len(wg) <= 3):
            return None, None
        if not all(isinstance(k, str) and k in ARG_KINDS for k in sig):
            return None, None
        debug = bool(plan) and plan[-1] == list(bounds_debug.PLAN_STEP) and sig[-1] == "ptr"   # XEJIT_DEBUG=1's buffer
        if debug != ("debug_sites" in meta) or (debug and not _sites_ok(meta["debug_sites"])):
            return None, None
        for step, kind in zip(plan[:-1] if debug else plan, sig):
            if not (isinstance(step, list) and len(step) == 3 and type(step[0]) is int
                    and 0 <= step[0] < num_args and step[1] == kind and isinstance(step[2], str)
                    and (step[2] in ("ptr", "value") or re.fullmatch(r"(shape|stride)\d", step[2]))):
                return None, None
        if not all(type(w) is int and w >= 1 for w in wg) or not isinstance(meta.get("build_options", ""), str):
            return None, None
        spv = base64.b64decode(meta["spv"].encode("ascii"), validate=True)
    except (UnicodeError, ValueError, binascii.Error):   # json and base64 errors are ValueErrors
        return None, None
    if structure_problem(spv, name) is not None:
        return None, None
    return meta, spv


def _sites_ok(sites: Any) -> bool:
    return isinstance(sites, list) and all(
        isinstance(x, dict) and all(isinstance(x.get(k), str) for k in ("loc", "kind", "array")) for x in sites)


def clear_memory_caches() -> None:
    """Forget compiled kernels held in this process (the on-disk cache is kept), and the
    prepared launches made from them (``xejit.launch_plan``)."""
    _memo.clear()
    _fast.clear()
    _debug_sites.clear()
    launch_plan.invalidate()


def _facts(x):
    if type(x) is np.ndarray:   # the common case, without building __array_interface__
        it = x.itemsize
        return x.shape, tuple(s // it for s in x.strides)
    _, shape, strides, _ = array_facts(x)
    return shape, strides


def expand_args(plan, args: list, debug_buffer: np.ndarray | None = None) -> list:
    """The kernel's runtime arguments from the Python call's runtime arguments (ABI expansion);
    ``debug_buffer`` is passed for the hidden report argument of ``XEJIT_DEBUG=1`` builds."""
    out, facts = [], {}
    for i, kind, what in plan:
        if what == "debug":
            out.append(debug_buffer)
            continue
        v = args[i]
        if what == "ptr":
            out.append(v)
        elif what == "value":
            out.append(float(v) if kind == "f32" else int(v))
        else:
            if i not in facts:
                facts[i] = _facts(v)
            shape, strides = facts[i]
            d = int(what[-1])
            out.append(int(shape[d]) if what.startswith("shape") else int(strides[d]))
    return out


def launch_queue(args: list, names: list[str], where: str):
    """(device, queue) of a launch: the queue of the first array argument in SYCL USM memory
    described by a protocol (``UsmArray``: torch XPU tensors on torch's current stream, DLPack
    oneAPI and SUAI arrays), else the default device's. Every other array must live on that
    queue's device and context: a host array (numpy, a torch CPU tensor) beside a device array is a
    mixed-device error unless it is USM memory of the same context (``xejit.runtime.usm``); an
    array on another device or context is an error naming it."""
    first = next((i for i, a in enumerate(args) if isinstance(a, UsmArray)), None)
    if first is None:
        dev = default_device()
        return dev, dev.queue
    queue = args[first].queue
    qdev, qctx = queue.sycl_device, queue.sycl_context
    here = f"{qdev.filter_string} ({qdev.name})"
    for i, a in enumerate(args):
        name = f"{where}: argument {names[i]!r}"
        if i == first:
            usm_memory(a, queue, name)   # is it USM memory of the queue's context? (checked once per view)
            continue
        if isinstance(a, UsmArray):
            if a.queue.sycl_device != qdev:
                d = a.queue.sycl_device
                raise ArgumentValueError(
                    f"{name} is on device {d.filter_string} ({d.name}) but the launch queue, taken from argument "
                    f"{names[first]!r}, is on {here}: pass arrays of one device")
            if a.queue.sycl_context != qctx:
                raise ArgumentValueError(
                    f"{name} is USM memory of another SYCL context than the launch queue's (taken from argument "
                    f"{names[first]!r}, on {here}): pass arrays of one context")
            usm_memory(a, queue, name)
        elif isinstance(a, np.ndarray) or _is_host_tensor(a):
            if isinstance(a, np.ndarray):
                owner = _usm_owner(a)
                if owner is not None and owner.sycl_context == qctx and owner.sycl_device == qdev:
                    continue
            kind = "a torch CPU tensor" if _is_host_tensor(a) else "a host (numpy) array"
            raise ArgumentValueError(
                f"{name} is {kind} but argument {names[first]!r} is on the SYCL device {here}: mixed devices; "
                f"move it to that device first")
    return device_for_queue(queue), queue


def _is_host_tensor(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr") and x.device.type == "cpu"


def compile_and_launch(kernel, module: Module, grid: tuple[int, ...], args: list, options: dict) -> tuple | None:
    """Compile ``module`` for the launch's device (cached) and run it on ``grid`` workgroups, on
    the queue of the arguments (see :func:`launch_queue`) or the default device's.

    Returns (queue, runtime kernel, argument plan, workgroup size), or None for an empty grid."""
    grid = tuple(int(g) for g in grid)
    if not 1 <= len(grid) <= 3:
        raise ArgumentError(f"grid must have 1 to 3 sizes, got {grid}")
    fn = module.functions[0]
    device, queue = launch_queue(list(args), list(fn.arg_names), getattr(kernel, "__name__", fn.name))
    if any(g == 0 for g in grid):
        return None
    rk, _, plan, wg = compiled(kernel, module, options, device)
    block = tuple(wg[:len(grid)])
    # The runtime takes OpenCL order (it reverses for dpctl's SYCL ranges): program_id(0) is axis 0.
    sites = _debug_sites.get(id(rk))
    if sites is None:
        rk.launch(grid, block, *expand_args(plan, list(args)), queue=queue)
        return queue, rk, plan, wg
    buf = bounds_debug.new_buffer()     # XEJIT_DEBUG=1: did a lane go out of range?
    rk.launch(grid, block, *expand_args(plan, list(args), buf), queue=queue)
    shapes = {fn.arg_names[i]: np.shape(a) for i, a in enumerate(args) if isinstance(a, np.ndarray)}
    bounds_debug.raise_if_reported(buf, sites, getattr(kernel, "__name__", fn.name), shapes)
    return None   # not prepared: every debug launch needs its own report buffer


__all__ = ["compile_and_launch", "compiled", "clear_memory_caches", "expand_args", "cache_key", "usable_entry",
           "emulated_target", "np"]
