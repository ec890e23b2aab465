"""Intel's GPU compiler (ocloc + IGC) as a compile stage: SPIR-V -> device binary (zebin) + ISA.

ocloc is the offline form of the compiler the Level Zero driver runs on our SPIR-V, so what it
reports -- registers, spill and private bytes, the instructions of the hot loop -- is what a GPU
would run, measured without one. It is found, in order, at ``XEJIT_OCLOC`` (a path to an
executable), in the folder ``python -m xejit toolchain install`` fills (``XEJIT_TOOLCHAIN_DIR``,
default ``~/.cache/xejit-toolchain``), or on ``PATH`` (Intel's driver packages install it).

The binary's ``.ze_info`` section (YAML) is read with pyelftools and PyYAML; the ISA comes from
``ocloc disasm`` and is summarized by :mod:`xejit.codegen.isa`.

Example (needs the toolchain):
    >>> from xejit.codegen import builtins as bi, spirv                   # doctest: +SKIP
    >>> m = bi.new_module("k"); fn = bi.kernel(m, "k", [], subgroup_size=16)
    >>> _ = __import__("llvmlite").ir.IRBuilder(fn.append_basic_block()).ret_void()
    >>> b = compile_spirv(spirv.to_spirv(m), "pvc")
    >>> b.grf_count, b.spill_bytes
    (128, 0)
"""
from __future__ import annotations

import io
import yaml
from elftools.elf.elffile import ELFFile
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from . import isa
from ..errors import ToolError
from .. import options
from .targets import Target, get_target

__all__ = ["Toolchain", "DeviceBinary", "ToolchainMissingError", "find_toolchain", "require_toolchain",
           "toolchain_dir", "compile_spirv", "choose_grf_mode"]


class ToolchainMissingError(ToolError):
    """Intel's GPU compiler is needed but not installed."""


def toolchain_dir() -> Path:
    """Where ``python -m xejit toolchain install`` puts Intel's compiler (``XEJIT_TOOLCHAIN_DIR``)."""
    return options.current().toolchain_dir


@dataclass(frozen=True)
class Toolchain:
    """A runnable ocloc: the command, its version, where it came from, and (when xejit installed
    it) the Debian package versions it was unpacked from."""
    command: tuple[str, ...]
    version: str
    origin: str
    packages: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    def describe(self) -> str:
        igc = self.packages.get("libigc2")
        return f"ocloc {self.version}" + (f", IGC {igc}" if igc else "") + f" ({self.origin})"


def _probe(command: list[str], origin: str, packages: dict[str, str] | None = None) -> Toolchain | None:
    try:
        out = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    version = (out.stdout.strip().splitlines() or [""])[-1].strip()
    if out.returncode != 0 or not version:
        return None
    return Toolchain(tuple(command), version, origin, dict(packages or {}))


_found: dict[str, Toolchain | None] = {}


def find_toolchain(refresh: bool = False) -> Toolchain | None:
    """The ocloc to use (see the module docstring for the search order), or None."""
    env = options.current().ocloc or ""
    where = str(toolchain_dir())
    key = f"{env}|{where}"
    if key in _found and not refresh:
        return _found[key]
    tc = None
    if env:
        tc = _probe([env], "XEJIT_OCLOC")
        if tc is None:
            raise ToolchainMissingError(f"XEJIT_OCLOC={env!r} does not run ('{env} --version' failed)")
    if tc is None:
        wrapper = Path(where) / "ocloc"
        if wrapper.exists():
            try:
                packages = json.loads((Path(where) / "manifest.json").read_text()).get("packages", {})
            except (OSError, ValueError):
                packages = {}
            tc = _probe([str(wrapper)], f"installed by xejit in {where}", packages)
    if tc is None and shutil.which("ocloc"):
        tc = _probe([shutil.which("ocloc")], "PATH")
    _found[key] = tc
    return tc


def require_toolchain() -> Toolchain:
    """:func:`find_toolchain`, or a :class:`ToolchainMissingError` that says how to install it."""
    tc = find_toolchain()
    if tc is None:
        raise ToolchainMissingError(
            "Intel's GPU compiler (ocloc) is not installed: run `python -m xejit toolchain install` "
            "(unpacks Debian's intel-ocloc and IGC into "
            f"{toolchain_dir()}), or set XEJIT_OCLOC to an ocloc executable")
    return tc


@dataclass
class DeviceBinary:
    """What Intel's compiler made of one SPIR-V module for one device and GRF mode."""
    target: str
    device: str
    grf_mode: str
    options: str
    zebin: bytes = field(repr=False)
    isa: str = field(repr=False)
    toolchain: str
    grf_count: int
    spill_bytes: int
    private_bytes: int
    slm_bytes: int
    simd_size: int
    hot_loop: isa.LoopMix | None
    dpas_loops: list[isa.LoopMix] = field(default_factory=list, repr=False)

    def summary(self) -> str:
        return (f"GRF {self.grf_count}, spill {self.spill_bytes} B, private {self.private_bytes} B, "
                f"SLM {self.slm_bytes} B, SIMD {self.simd_size}")

    def hot_loop_text(self) -> str:
        m = self.hot_loop
        if m is None:
            return "no loop"
        text = (f"{m.instructions} instructions: {m.dpas} dpas, {m.block_loads} 2D block loads, "
                f"{m.prefetches} prefetches, {m.block_stores} block stores, {m.spill_sends} spill sends, "
                f"{m.private_sends} private sends, {m.other_sends} other sends")
        if m.dpas:
            text += f" -> {m.per_dpas} instructions per DPAS (ideal {m.ideal_per_dpas})"
        return text

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, "device": self.device, "grf_mode": self.grf_mode, "options": self.options,
                "toolchain": self.toolchain, "grf_count": self.grf_count, "spill_bytes": self.spill_bytes,
                "private_bytes": self.private_bytes, "slm_bytes": self.slm_bytes, "simd_size": self.simd_size,
                "hot_loop": self.hot_loop.as_dict() if self.hot_loop else None}


def _ze_info(zebin: bytes) -> dict[str, Any]:
    """The first kernel's ``execution_env`` of a zebin's ``.ze_info``."""


    sec = ELFFile(io.BytesIO(zebin)).get_section_by_name(".ze_info")
    if sec is None:
        raise ToolError("Intel's compiler wrote a binary without a .ze_info section")
    info = yaml.safe_load(sec.data().decode())
    kernels = info.get("kernels") or [{}]
    return kernels[0].get("execution_env", {})


class BinaryCache(Protocol):
    def get(self, key: str) -> bytes | None: ...
    def put(self, key: str, payload: bytes) -> None: ...


_memo: dict[str, bytes] = {}
_memo_lock = threading.Lock()


def _run(cmd: list[str], what: str, spv_path: str | None = None) -> subprocess.CompletedProcess:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise ToolError(f"Intel's compiler took more than 600 s to {what}; rerun: {' '.join(cmd)}") from None
    if out.returncode != 0:
        log = (out.stdout + out.stderr).strip()
        keep = ""
        if spv_path:
            kept = tempfile.mkstemp(suffix=".spv", prefix="xejit-ocloc-")[1]
            shutil.copy(spv_path, kept)
            keep = f"\nmodule kept at {kept}"
            cmd = [kept if c == spv_path else c for c in cmd]
        raise ToolError(f"Intel's compiler could not {what}:\n{log[-4000:]}{keep}\nrerun: "
                        + " ".join(repr(c) if " " in c else c for c in cmd))
    return out


def compile_spirv(spv: bytes, target: str | Target, grf_mode: str = "default",
                  cache: BinaryCache | None = None) -> DeviceBinary:
    """Build ``spv`` for ``target``'s GPU with Intel's compiler and read what it made.

    ``grf_mode`` is ``"default"`` or ``"256"`` (the large register file, with the same build
    option the runtime passes). Results are kept per process (and in ``cache`` when given) by
    the module's hash, the device, the options and the compiler's version.
    """
    tgt = get_target(target) if isinstance(target, str) else target
    if tgt.ocloc_device is None:
        raise ValueError(f"target {tgt.name!r} is not an Intel GPU; Intel's compiler does not build for it")
    if grf_mode not in ("default", "256"):
        raise ValueError(f"grf_mode for a device build is 'default' or '256', got {grf_mode!r}")
    tc = require_toolchain()
    options = tgt.registers.build_options(grf_mode, "ocloc") if tgt.registers else ""
    key = hashlib.sha256(b"|".join([spv, tgt.ocloc_device.encode(), options.encode(),
                                    tc.version.encode(), b"zebin-v1"])).hexdigest()
    with _memo_lock:
        zebin = _memo.get(key)
    if zebin is None and cache is not None:
        zebin = cache.get(key)
        if zebin is not None and not zebin.startswith(b"\x7fELF"):
            zebin = None
    with tempfile.TemporaryDirectory(prefix="xejit-ocloc-") as tmp:
        spv_path = os.path.join(tmp, "kernel.spv")
        with open(spv_path, "wb") as f:
            f.write(spv)
        if zebin is None:
            cmd = [*tc.command, "compile", "-spirv_input", "-file", spv_path, "-device", tgt.ocloc_device,
                   "-out_dir", tmp, "-output", "kernel", "-output_no_suffix", "-q"]
            if options:
                cmd += ["-options", options]
            _run(cmd, f"build the module for {tgt.ocloc_device}", spv_path)
            zebin = Path(tmp, "kernel.bin").read_bytes()
            if cache is not None:
                cache.put(key, zebin)
        with _memo_lock:
            _memo[key] = zebin
        bin_path = os.path.join(tmp, "kernel.bin")
        Path(bin_path).write_bytes(zebin)
        dump = os.path.join(tmp, "dump")
        _run([*tc.command, "disasm", "-file", bin_path, "-device", tgt.ocloc_device, "-dump", dump],
             "disassemble the binary")
        texts = sorted(Path(dump).glob(".text.*.asm"))
        asm = "\n".join(p.read_text() for p in texts)
    env = _ze_info(zebin)
    listing = isa.parse(asm)
    dpas_loops = [isa.mix(listing[a:b + 1]) for a, b in isa.loops(listing)]
    return DeviceBinary(
        target=tgt.name, device=tgt.ocloc_device, grf_mode=grf_mode, options=options, zebin=zebin, isa=asm,
        toolchain=tc.describe(), grf_count=int(env.get("grf_count", 0)), spill_bytes=int(env.get("spill_size", 0)),
        private_bytes=int(env.get("private_size", 0)), slm_bytes=int(env.get("slm_size", 0)),
        simd_size=int(env.get("simd_size", 0)), hot_loop=isa.hot_loop(listing),
        dpas_loops=[m for m in dpas_loops if m.dpas])


def choose_grf_mode(spv: bytes, target: str | Target, cache: BinaryCache | None = None) -> tuple[DeviceBinary, str]:
    """``grf_mode="auto"``: build with the default register file; if that spills and the target
    has a large one, build again with it and keep the one that spills less (the default on a
    tie: it runs twice the threads). Returns the binary kept and the reason, one sentence."""
    tgt = get_target(target) if isinstance(target, str) else target
    default = compile_spirv(spv, tgt, "default", cache)
    if default.spill_bytes == 0:
        return default, "the default register file does not spill"
    if tgt.registers is None or tgt.registers.large_grf_count is None:
        return default, f"{tgt.name} has no large register file (the default spills {default.spill_bytes} B)"
    large = compile_spirv(spv, tgt, "256", cache)
    if large.spill_bytes < default.spill_bytes:
        return large, (f"the default register file spills {default.spill_bytes} B, "
                       f"the large one {large.spill_bytes} B")
    return default, (f"the large register file spills as much ({large.spill_bytes} B) as the default "
                     f"({default.spill_bytes} B)")
