"""2D block loads and prefetches through IGC's address payloads (``xejit.codegen.block_payload``).

The device tests need Intel's compiler (``python -m xejit toolchain install``); they fail without
it, never skip. No GPU runs here: what is checked is that Intel's compiler takes the module, that
it issues the same block messages as through the Khronos builtins, and fewer instructions around
them in the k-loop; emulation keeps the Khronos semantics (tests/xegpu checks it against numpy).
"""
import dataclasses
import re

import numpy as np
import pytest

from tests.kernels import matmul
from xejit.codegen import block_payload as bp
from xejit.codegen import isa
from xejit.codegen.emulation import BlockVariant
from xejit.codegen.targets import get_target

PVC = get_target("pvc")


@pytest.mark.parametrize("kind,bits,w,h,count,name", [
    ("load", 16, 16, 8, 2, "__builtin_IB_subgroup_block_read_ap_u16_m8k16v2"),      # A, fp16
    ("load", 8, 32, 8, 1, "__builtin_IB_subgroup_block_read_ap_u8_m8k32v1"),        # A, int8
    ("load_transform", 16, 16, 16, 1, "__builtin_IB_subgroup_block_read_ap_transform_u16_m16k16v1"),
    ("load_transpose", 32, 8, 16, 1, "__builtin_IB_subgroup_block_read_ap_transpose_u32_m16k8v1"),
    ("prefetch", 16, 16, 8, 2, "__builtin_IB_subgroup_block_read_ap_prefetch_u16_m8k16v2"),
])
def test_shapes_with_an_address_payload_builtin(kind, bits, w, h, count, name):
    v = BlockVariant(kind, 16, bits, w, h, count)
    assert bp.problem(PVC, v) is None
    assert bp.builtin_name(v) == name


@pytest.mark.parametrize("target,kind,bits,w,h,count,why", [
    ("pvc", "store", 16, 16, 8, 1, "SPIR-V builtin"),
    ("pvc", "load_transform", 16, 16, 32, 2, "more than|not a SPIR-V vector"),   # 32 x i32 per lane
    ("pvc", "load", 16, 16, 1, 2, "pads each block"),          # 32-byte blocks, padded to a register
    ("pvc", "load_transpose", 32, 16, 16, 1, "not an address-payload shape"),
    ("pvc", "load", 16, 16, 24, 1, "no address-payload builtin name"),
    ("dg2", "load", 16, 16, 8, 1, "no address-payload"),
])
def test_shapes_left_to_the_spirv_builtin_say_why(target, kind, bits, w, h, count, why):
    assert re.search(why, bp.problem(get_target(target), BlockVariant(kind, 16, bits, w, h, count)))


def _gemm(target: object = "pvc", emulate: bool = False):
    a, b, c = np.empty((256, 256), np.float16), np.empty((256, 256), np.float16), np.empty((256, 256), np.float32)
    return matmul.compile(a, b, c, 256, 256, 256, target=target, emulate=emulate, BM=64, BN=64, BK=16,
                          num_subgroups=4)    # a library config (32x32 subgroup tiles): no spill


def _block_messages(isa_text: str) -> list[str]:
    """The message descriptors of the 2D block sends, sorted (shape, VNNI, cache controls...)."""
    return sorted(re.findall(r"(0x[0-9A-F]{8})\s+\{[^}]*\}\s*//[^\n]*block2d", isa_text))


def test_emulation_keeps_the_khronos_builtins():
    ck = _gemm(emulate=True)
    assert "__builtin_IB_" not in ck.asm["llir"]


def test_intel_compiler_takes_payload_modules_and_issues_the_same_messages():
    ck = _gemm()
    assert "__builtin_IB_subgroup_createBlock2DAddressPayload" in ck.asm["llir"]    # and spirv-val passed
    with_ap = ck.device_binary
    khronos = _gemm(dataclasses.replace(PVC, block_io=dataclasses.replace(PVC.block_io, address_payload=False)))
    assert "__builtin_IB_" not in khronos.asm["llir"]
    assert _block_messages(with_ap.isa) == _block_messages(khronos.device_binary.isa) != []
    fast, slow = with_ap.hot_loop, khronos.device_binary.hot_loop
    assert (fast.dpas, fast.block_loads, fast.prefetches) == (slow.dpas, slow.block_loads, slow.prefetches)
    assert fast.instructions < slow.instructions, (fast, slow)
    assert with_ap.spill_bytes == 0 and with_ap.private_bytes == 0
    assert isa.hot_loop(isa.parse(with_ap.isa)) == fast
