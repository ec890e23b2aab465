"""Hardware descriptors: what each xejit target can do, as data.

Passes and lowering never test a target's *name*; they read these fields.  Every number comes
from ``/work/shared/HARDWARE.md`` (which cites the Khronos specs, intel-xpu-backend-for-triton's
TritonGEN verifier and MLIR's XeGPU uArch tables); the source is noted beside each value.

Example:
    >>> t = get_target("pvc")
    >>> t.subgroup_size, t.dpas.k_of("bf16"), t.dpas.n
    (16, 16, 16)
    >>> check_block_shape(t, 16, 16, 8, 2) is None
    True
    >>> check_block_shape(t, 32, 16, 8, 4)
    '2D block load: 32-bit elements allow at most 2 blocks per load (got 4)'
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..errors import XejitValueError

__all__ = [
    "DpasSpec", "BlockIOLimits", "RegisterFile", "Target", "TARGETS", "get_target",
    "check_block_shape", "check_block_surface", "BLOCK_OPS",
]

#: 2D block operations (names used by :func:`check_block_shape` and by ``emulation``).
BLOCK_OPS = ("load", "load_transform", "load_transpose", "prefetch", "store")

# Element types a DPAS can take, with their width in bits.
_DPAS_ELEM_BITS = {"tf32": 32, "bf16": 16, "fp16": 16, "int8": 8, "uint8": 8, "int4": 4, "uint4": 4}


@dataclass(frozen=True)
class DpasSpec:
    """One target's SubgroupMatrixMultiplyAccumulateINTEL shapes.

    M (repeat count) is any of ``repeat_counts``; N is the subgroup size; K is 32 bytes of
    operand (SPV_INTEL_subgroup_matrix_multiply_accumulate; cl_intel_subgroup_matrix_multiply_accumulate:
    "M may be equal to 1, 2, 4, or 8", "N must be equal to 8 ... or 16"; HARDWARE.md "DPAS").
    """

    n: int
    #: (operand type, K) pairs; K = 256 bits / element bits.
    k_by_type: tuple[tuple[str, int], ...]
    #: (operand type, accumulator/result types) pairs, "f32"/"bf16"/"fp16"/"i32".
    acc_by_type: tuple[tuple[str, tuple[str, ...]], ...]
    repeat_counts: tuple[int, ...] = (1, 2, 4, 8)

    @property
    def max_m(self) -> int:
        return max(self.repeat_counts)

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(t for t, _ in self.k_by_type)

    def k_of(self, ty: str) -> Optional[int]:
        """K for operand type ``ty`` or None when the target has no DPAS for it."""
        return dict(self.k_by_type).get(ty)

    def acc_types(self, ty: str) -> tuple[str, ...]:
        return dict(self.acc_by_type).get(ty, ())

    def supports(self, a_ty: str, b_ty: str, acc_ty: str, m: int) -> Optional[str]:
        """None when ``(a_ty, b_ty, acc_ty, m)`` is a DPAS of this target, else the reason."""
        if m not in self.repeat_counts:
            return f"DPAS repeat count M={m} not in {self.repeat_counts}"
        for t in (a_ty, b_ty):
            if self.k_of(t) is None:
                return f"DPAS has no operand type {t!r} here (types: {', '.join(self.types)})"
        if self.k_of(a_ty) != self.k_of(b_ty):
            return f"DPAS operand types {a_ty!r} and {b_ty!r} have different K"
        if acc_ty not in self.acc_types(a_ty):
            return f"DPAS on {a_ty!r} accumulates in {self.acc_types(a_ty)}, not {acc_ty!r}"
        return None


def _k(types: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    return tuple((t, 256 // _DPAS_ELEM_BITS[t]) for t in types)


@dataclass(frozen=True)
class BlockIOLimits:
    """Limits of SPV_INTEL_2d_block_io on a target (HARDWARE.md "2D block IO (PVC, Xe2)")."""

    max_row_bytes: int = 64            # elem_bits * width * count <= 512 (TritonGEN, MLIR Xe2 uArch)
    max_height: int = 32               # OpenCL cl_intel_subgroup_2d_block_io: rows in [1..32]
    max_count: int = 4                 # 8/16-bit: count <= 4 (16x4c for 8-bit in the OpenCL list)
    max_count_32bit: int = 2           # 32-bit: 8x2c only (OpenCL list)
    max_count_64bit: int = 1
    store_max_height: int = 8          # OpenCL write functions: rows in [1, 2, 4, 8]
    store_max_count: int = 1           # OpenCL write functions: 1c only
    base_alignment: int = 64           # SPIR-V spec: base address cache-line aligned (64 bytes)
    # Pitch: multiple of 16 bytes per TritonGEN/HARDWARE.md; the SPIR-V spec says multiple of 8.
    pitch_multiple: int = 16
    # Minimum width and pitch: 64 B per TritonGEN and the SPIR-V spec; MLIR's Xe2 table says 32.
    min_width_bytes: int = 64
    min_pitch_bytes: int = 64
    max_surface: int = 1 << 24         # width, height, pitch <= 2^24 (SPIR-V spec)
    #: x coordinate alignment in elements per element size in bits (SPIR-V spec "Restrictions").
    x_alignment: tuple[tuple[int, int], ...] = ((8, 4), (16, 2), (32, 1), (64, 1))
    elem_bits: tuple[int, ...] = (8, 16, 32, 64)
    transform_elem_bits: tuple[int, ...] = (8, 16)   # VNNI packing for the B operand
    transpose_elem_bits: tuple[int, ...] = (32, 64)  # 16-bit data is transposed as 32-bit pairs
    transpose_max_width: tuple[tuple[int, int], ...] = ((32, 8), (64, 4))  # OpenCL: 32b_{16,32}r8x1c
    #: Intel's compiler (IGC) takes its own 2D block builtins, which keep the block message's
    #: address payload (base, width, height, pitch, x, y, block shape) in a register built once
    #: (``__builtin_IB_subgroup_createBlock2DAddressPayload``) and updated per access (set block
    #: x / y), instead of the Khronos builtins' whole surface on every call, whose payload IGC
    #: rebuilds per message inside k-loops (benchmarks/bench_device_code.py).
    address_payload: bool = False
    #: block messages take immediate x / y offsets (IGC: ``LSC2DSupportImmXY``, Xe2 and later):
    #: IGC loads blocks of one surface at constant offsets from one payload. Without them (pvc)
    #: it copies the payload per such load, so the XeGPU lowering gives each descriptor a k-loop
    #: moves a surface of its own (``block_coords.own_surface``).
    immediate_offsets: bool = True
    #: Intel's compiler puts 3 no-op reads before any instruction that rewrites a register a
    #: send may still be reading (visa ``SWSB::insertPVCWA``, pvc only): a k-loop's prefetch
    #: payloads, rewritten every k-step. The pipelining pass then prefetches a k-step's tiles
    #: with one message per subgroup (``passes.pipelining.split_prefetch``).
    payload_war_workaround: bool = False
    #: Intel's compiler needs one 32-deep K-slice of 8-bit A and B beyond a k-step's operands
    #: (the resource model's calibration, ``autotuner.estimate_gemm``): int8 64x32 tiles at BK=64
    #: (256x256x64/32sg) spill 4.0-4.4 KB on bmg and lnl, in the per-lane version of the k-loop.
    #: pvc builds them with 0 spill since that version gathers each operand block at its DPAS
    #: (192 B when it gathered the k-step at its loads).
    int8_slice_ahead: bool = True

    def x_align(self, elem_bits: int) -> int:
        return dict(self.x_alignment).get(elem_bits, 1)


@dataclass(frozen=True)
class RegisterFile:
    """General register file per hardware thread (one subgroup)."""

    count: int
    bytes_each: int
    large_grf_count: Optional[int] = None   # registers in large-GRF ("256") mode
    #: The build option that selects large-GRF mode, per program-build API (HARDWARE.md: Level
    #: Zero and ocloc spell it -ze-opt-large-register-file, OpenCL -cl-intel-256-GRF-per-thread).
    large_grf_options: tuple[tuple[str, str], ...] = ()
    #: Registers the resource model leaves to the compiler (addresses, block descriptors, loop
    #: state). Measured with Intel's compiler (benchmarks/bench_device_code.py) on pvc/bmg/lnl
    #: GEMMs: tile data filling 128 of 128 registers spills 0.6-2.4 KB; 104 of 128 and 224 of
    #: 256 do not.
    reserved: int = 16

    def build_options(self, grf_mode: str, api: str) -> str:
        """The build options for ``grf_mode`` (``"default"`` or ``"256"``) through ``api``
        (``"level_zero"``, ``"opencl"`` or ``"ocloc"``)."""
        if grf_mode != "256" or self.large_grf_count is None:
            return ""
        return dict(self.large_grf_options).get("level_zero" if api == "ocloc" else api, "")

    @property
    def bytes_total(self) -> int:
        return self.count * self.bytes_each


@dataclass(frozen=True)
class Target:
    """A compilation target.  ``emulatable`` targets run on the CPU device with
    DPAS / 2D block IO replaced by ``xejit.codegen.emulation``."""

    name: str
    description: str
    subgroup_sizes: tuple[int, ...]
    dpas: Optional[DpasSpec]
    block_io: Optional[BlockIOLimits]
    registers: Optional[RegisterFile]
    slm_bytes: Optional[int]
    named_barriers: int
    spirv_extensions: tuple[str, ...]
    has_block_reads: bool = True            # cl_intel_subgroups SubgroupBlockReadINTEL
    #: Row pitches (bytes) at multiples of which streamed B panels hit few cache sets, so
    #: ``xejit.matmul`` pads them (measured on the CPU device, docs/compiler.md); None: never.
    conflict_pitch_bytes: Optional[int] = None
    emulatable: bool = False
    #: The ``-device`` name Intel's offline compiler (ocloc) builds for; None: not an Intel GPU.
    ocloc_device: Optional[str] = None
    #: LLVM's middle-end on this target's XeGPU modules (``xejit.codegen.spirv.optimize_and_emit``):
    #: "O2" (without vectorizers or unrolling) or "O2-function" (O2's function simplification
    #: pipeline alone: no module passes, no late loop passes), chosen where Intel's compiler gives
    #: the library's GEMM picks the same code for both (docs/compiler.md, "LLVM pipeline").
    llvm_pipeline: str = "O2"
    #: Workgroups ``xejit.matmul``'s perf model counts as running at once on this GPU (None: the
    #: CPU device, 4 per host core). Not the device's concurrency: a placeholder, with no GPU here
    #: to time, that keeps the picks independent of the host (they were calibrated per DPAS in
    #: Intel's compiler with it at 8); the model does not yet weigh how few subgroups a decode
    #: config puts on the device, nor B read again for every 8 rows of C (docs/autotune-and-matmul.md).
    model_workgroups_at_once: Optional[int] = 8
    notes: tuple[str, ...] = field(default=())

    @property
    def subgroup_size(self) -> int:
        """The subgroup size xejit compiles for (the first of ``subgroup_sizes``)."""
        return self.subgroup_sizes[0]

    @property
    def has_dpas(self) -> bool:
        return self.dpas is not None

    @property
    def has_block_io(self) -> bool:
        return self.block_io is not None


_EXT_SUBGROUPS = "SPV_INTEL_subgroups"
_EXT_DPAS = "SPV_INTEL_subgroup_matrix_multiply_accumulate"
_EXT_2D = "SPV_INTEL_2d_block_io"
_EXT_BF16 = "SPV_INTEL_bfloat16_conversion"
_EXT_CACHE = "SPV_INTEL_cache_controls"

# IGC is the compiler of every target with 2D block IO: its address-payload builtins apply.
_XE_BLOCK_IO = BlockIOLimits(address_payload=True)
_XE_HPC_BLOCK_IO = BlockIOLimits(address_payload=True, immediate_offsets=False, payload_war_workaround=True,
                                 int8_slice_ahead=False)

_LARGE_GRF_OPTIONS = (("level_zero", "-ze-opt-large-register-file"), ("opencl", "-cl-intel-256-GRF-per-thread"))
# 128 x 64-byte registers per thread, 256 in large-GRF mode (HARDWARE.md; for Xe2/Xe3 assumed equal
# and confirmed by Intel's compiler: grf_count 256 in .ze_info with the large-GRF option).
_XE_GRF = RegisterFile(count=128, bytes_each=64, large_grf_count=256, large_grf_options=_LARGE_GRF_OPTIONS)

_XE_HPC_XE2_DPAS = DpasSpec(
    n=16,
    k_by_type=_k(("tf32", "bf16", "fp16", "int8", "uint8")),
    # fp32 accumulators everywhere; bf16/fp16 accumulators on N=16 devices (OpenCL spec);
    # tf32 accumulates in fp32 (SPIR-V spec operand flags 0x100/0x200).
    acc_by_type=(("tf32", ("f32",)), ("bf16", ("f32", "bf16")), ("fp16", ("f32", "fp16")),
                 ("int8", ("i32",)), ("uint8", ("i32",))),
)

TARGETS: dict[str, Target] = {
    "pvc": Target(
        name="pvc",
        description="Intel Data Center GPU Max (Xe-HPC, Ponte Vecchio)",
        subgroup_sizes=(16, 32),            # DESIGN.md: 16
        dpas=_XE_HPC_XE2_DPAS,              # HARDWARE.md: M<=8, N=16, K=32 bytes
        block_io=_XE_HPC_BLOCK_IO,          # HARDWARE.md "2D block IO (PVC, Xe2)"
        registers=_XE_GRF,                  # HARDWARE.md
        slm_bytes=128 * 1024,               # HARDWARE.md: 128 KB per Xe core
        named_barriers=32,                  # HARDWARE.md: up to 32 per Xe core
        spirv_extensions=(_EXT_SUBGROUPS, _EXT_DPAS, _EXT_2D, _EXT_BF16, _EXT_CACHE),
        emulatable=True,
        ocloc_device="pvc",
        llvm_pipeline="O2-function",       # measured: the same GEMM picks' code, 30% less time
    ),
    "bmg": Target(
        name="bmg",
        description="Intel Arc B-series (Xe2-HPG, Battlemage)",
        subgroup_sizes=(16, 32),
        dpas=_XE_HPC_XE2_DPAS,              # HARDWARE.md / MLIR uArch IntelGpuXe2.h
        block_io=_XE_BLOCK_IO,
        registers=_XE_GRF,                  # assumed = Xe-HPC GRF
        slm_bytes=128 * 1024,               # assumed = Xe-HPC per Xe core (not in HARDWARE.md)
        named_barriers=32,                  # assumed = Xe-HPC (not in HARDWARE.md)
        spirv_extensions=(_EXT_SUBGROUPS, _EXT_DPAS, _EXT_2D, _EXT_BF16, _EXT_CACHE),
        emulatable=True,
        ocloc_device="bmg",
        llvm_pipeline="O2-function",       # measured: the same GEMM picks' code, 30% less time
        notes=("register/SLM/barrier figures assumed equal to pvc",),
    ),
    "lnl": Target(
        name="lnl",
        description="Intel Core Ultra 200V (Lunar Lake, Xe2-LPG)",
        subgroup_sizes=(16, 32),
        dpas=_XE_HPC_XE2_DPAS,
        block_io=_XE_BLOCK_IO,
        registers=_XE_GRF,                  # assumed = Xe-HPC GRF
        slm_bytes=128 * 1024,               # assumed
        named_barriers=32,                  # assumed
        spirv_extensions=(_EXT_SUBGROUPS, _EXT_DPAS, _EXT_2D, _EXT_BF16, _EXT_CACHE),
        emulatable=True,
        ocloc_device="lnl",
        llvm_pipeline="O2-function",       # measured: the same GEMM picks' code, 30% less time
        notes=("register/SLM/barrier figures assumed equal to pvc",),
    ),
    "ptl": Target(
        name="ptl",
        description="Intel Core Ultra series 3 (Panther Lake, Xe3-LPG)",
        subgroup_sizes=(16, 32),
        dpas=_XE_HPC_XE2_DPAS,              # DESIGN.md: as Xe2
        block_io=_XE_BLOCK_IO,
        registers=_XE_GRF,                  # assumed = Xe2
        slm_bytes=128 * 1024,               # assumed
        named_barriers=32,                  # assumed
        spirv_extensions=(_EXT_SUBGROUPS, _EXT_DPAS, _EXT_2D, _EXT_BF16, _EXT_CACHE),
        emulatable=True,
        ocloc_device="ptl",
        # llvm_pipeline stays O2: O2-function lengthened one pick's hot loop (docs/compiler.md)
        notes=("register/SLM/barrier figures assumed equal to Xe2; Intel's compiler builds our DPAS / 2D block "
               "modules for it (the ptl tests) and, without the large-GRF option, sizes the register file per "
               "kernel (96-256 registers seen in .ze_info)",),
    ),
    "dg2": Target(
        name="dg2",
        description="Intel Arc A-series / Data Center GPU Flex (Xe-HPG, Alchemist)",
        subgroup_sizes=(8, 16, 32),         # DESIGN.md: 8 (the DPAS subgroup size)
        dpas=DpasSpec(                      # HARDWARE.md: N=8; OpenCL spec: fp32/i32 acc only at N=8
            n=8,
            k_by_type=_k(("bf16", "fp16", "int8", "uint8")),
            acc_by_type=(("bf16", ("f32",)), ("fp16", ("f32",)), ("int8", ("i32",)), ("uint8", ("i32",))),
        ),
        block_io=None,                      # DESIGN.md: no 2D block IO, block reads instead
        registers=RegisterFile(count=128, bytes_each=32, large_grf_count=None),  # Xe-HPG 32-byte GRF
        slm_bytes=64 * 1024,                # Xe-HPG: 64 KB per Xe core (not in HARDWARE.md)
        named_barriers=0,                   # named barriers are an Xe-HPC addition
        spirv_extensions=(_EXT_SUBGROUPS, _EXT_DPAS, _EXT_BF16),
        emulatable=True,
        ocloc_device="acm-g10",
        notes=("register/SLM figures not in HARDWARE.md",),
    ),
    "generic": Target(
        name="generic",
        description="any SPIR-V device with cl_intel_subgroups (e.g. the Intel OpenCL CPU runtime)",
        subgroup_sizes=(16, 8, 32),         # CPU device: subgroup sizes 4-64 (HARDWARE.md)
        dpas=None,                          # shuffles + FMA
        block_io=None,                      # block reads / plain loads
        registers=None,
        slm_bytes=None,                     # query the device
        named_barriers=0,
        model_workgroups_at_once=None,      # 4 per host core
        spirv_extensions=(_EXT_SUBGROUPS,),
        conflict_pitch_bytes=2048,          # measured: 1024^3 fp32 GEMM 1.7x with a padded B pitch
    ),
}


def get_target(name: str) -> Target:
    """The descriptor of target ``name`` (``pvc``, ``bmg``, ``lnl``, ``ptl``, ``dg2``, ``generic``)."""
    try:
        return TARGETS[name.lower()]
    except (KeyError, AttributeError):
        raise XejitValueError(f"unknown target {name!r}; known targets: {', '.join(TARGETS)}") from None


def _pow2(x: int) -> bool:
    return x > 0 and (x & (x - 1)) == 0


def check_block_shape(target: Target, elem_bits: int, width: int, height: int, count: int = 1,
                      op: str = "load") -> Optional[str]:
    """None when a 2D block ``op`` of ``count`` blocks of ``height`` x ``width`` elements of
    ``elem_bits`` bits is legal on ``target``; otherwise the reason, one sentence.

    ``op`` is one of :data:`BLOCK_OPS`.  Used to report (never silently take) fallbacks.
    """
    what = {"load": "2D block load", "load_transform": "2D block load with transform (VNNI)",
            "load_transpose": "2D block load with transpose", "prefetch": "2D block prefetch",
            "store": "2D block store"}.get(op)
    if what is None:
        raise ValueError(f"unknown 2D block op {op!r}; expected one of {BLOCK_OPS}")
    lim = target.block_io
    if lim is None:
        return f"target {target.name!r} has no 2D block IO"
    if elem_bits not in lim.elem_bits:
        return f"{what}: element size {elem_bits} bits not in {lim.elem_bits}"
    if op == "load_transform" and elem_bits not in lim.transform_elem_bits:
        return f"{what}: only {lim.transform_elem_bits}-bit elements can be VNNI-transformed (got {elem_bits})"
    if op == "load_transpose" and elem_bits not in lim.transpose_elem_bits:
        return (f"{what}: only {lim.transpose_elem_bits}-bit elements can be transposed (got {elem_bits}); "
                "transpose 16-bit data as 32-bit pairs")
    for nm, v in (("width", width), ("height", height), ("count", count)):
        if not _pow2(v):
            return f"{what}: block {nm} {v} is not a power of two"
    if op == "load_transform" and height * elem_bits < 32:
        return f"{what}: height {height} packs less than one 32-bit value"
    if width * elem_bits < 32 and op != "load_transpose":
        return f"{what}: a row of {width} x {elem_bits}-bit elements is narrower than 4 bytes"
    max_h = lim.store_max_height if op == "store" else lim.max_height
    if height > max_h:
        return f"{what}: height {height} exceeds {max_h} rows"
    max_c = lim.store_max_count if op == "store" else {32: lim.max_count_32bit, 64: lim.max_count_64bit}.get(
        elem_bits, lim.max_count)
    if op == "load_transpose":
        max_c = 1
    if count > max_c:
        cause = f"{elem_bits}-bit elements allow" if op not in ("store", "load_transpose") else "it allows"
        return f"{what}: {cause} at most {max_c} blocks per {op.split('_')[0]} (got {count})"
    if op == "load_transpose":
        max_w = dict(lim.transpose_max_width).get(elem_bits, 0)
        if width > max_w:
            return f"{what}: width {width} exceeds {max_w} {elem_bits}-bit elements (pre-transpose)"
        return None
    row_bytes = elem_bits * width * count // 8
    if row_bytes > lim.max_row_bytes:
        return (f"{what}: {count} x {width} x {elem_bits}-bit = {row_bytes} bytes per row exceeds "
                f"{lim.max_row_bytes} bytes")
    return None


def check_block_surface(target: Target, elem_bits: int, *, base_alignment: Optional[int] = None,
                        width_bytes: Optional[int] = None, height: Optional[int] = None,
                        pitch_bytes: Optional[int] = None, x_alignment: Optional[int] = None) -> Optional[str]:
    """None when a 2D surface (what is known of it) suits 2D block IO, else the reason.

    ``base_alignment`` is the known alignment of the base address in bytes, ``x_alignment`` the
    known alignment of the x coordinate in elements; unknown values (None) are not checked.
    """
    lim = target.block_io
    if lim is None:
        return f"target {target.name!r} has no 2D block IO"
    if base_alignment is not None and base_alignment % lim.base_alignment:
        return f"2D block IO: base address aligned to {base_alignment} bytes, {lim.base_alignment} needed"
    if width_bytes is not None and not lim.min_width_bytes <= width_bytes <= lim.max_surface:
        return f"2D block IO: surface width {width_bytes} bytes outside [{lim.min_width_bytes}, 2^24]"
    if height is not None and not 0 < height <= lim.max_surface:
        return f"2D block IO: surface height {height} rows outside [1, 2^24]"
    if pitch_bytes is not None:
        if pitch_bytes % lim.pitch_multiple:
            return f"2D block IO: pitch {pitch_bytes} bytes is not a multiple of {lim.pitch_multiple}"
        if not lim.min_pitch_bytes <= pitch_bytes <= lim.max_surface:
            return f"2D block IO: pitch {pitch_bytes} bytes outside [{lim.min_pitch_bytes}, 2^24]"
        if width_bytes is not None and pitch_bytes < width_bytes:
            return f"2D block IO: pitch {pitch_bytes} bytes is smaller than the width {width_bytes} bytes"
    need = lim.x_align(elem_bits)
    if x_alignment is not None and x_alignment % need:
        return f"2D block IO: x coordinate aligned to {x_alignment} elements, {need} needed for {elem_bits}-bit data"
    return None
