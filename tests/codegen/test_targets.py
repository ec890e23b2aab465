"""Target descriptors: the numbers HARDWARE.md gives, and the 2D block legality checks."""
import dataclasses

import pytest

from xejit.codegen.targets import TARGETS, check_block_shape, check_block_surface, get_target


def test_all_targets_present_and_frozen():
    assert set(TARGETS) == {"pvc", "bmg", "lnl", "ptl", "dg2", "generic"}
    t = get_target("PVC")
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.name = "x"
    with pytest.raises(ValueError, match="unknown target"):
        get_target("h100")


@pytest.mark.parametrize("name,sg,n", [("pvc", 16, 16), ("bmg", 16, 16), ("lnl", 16, 16), ("dg2", 8, 8)])
def test_dpas_shapes(name, sg, n):
    t = get_target(name)
    assert t.subgroup_size == sg and t.dpas.n == n and t.dpas.max_m == 8
    assert t.dpas.k_of("bf16") == 16 and t.dpas.k_of("fp16") == 16 and t.dpas.k_of("int8") == 32
    assert t.dpas.k_of("tf32") == (8 if name != "dg2" else None)
    assert t.dpas.supports("bf16", "bf16", "f32", 8) is None
    assert "repeat count" in t.dpas.supports("bf16", "bf16", "f32", 3)
    assert t.dpas.supports("int8", "int8", "f32", 8) is not None


def test_generic_and_dg2_have_no_block_io():
    assert get_target("generic").dpas is None and get_target("generic").block_io is None
    assert get_target("dg2").block_io is None and get_target("dg2").has_block_reads
    assert "no 2D block IO" in check_block_shape(get_target("dg2"), 16, 16, 8)
    assert "SPV_INTEL_2d_block_io" not in get_target("dg2").spirv_extensions
    assert "SPV_INTEL_2d_block_io" in get_target("pvc").spirv_extensions


def test_registers_and_slm():
    pvc = get_target("pvc")
    assert pvc.registers.count == 128 and pvc.registers.bytes_each == 64 and pvc.registers.large_grf_count == 256
    assert pvc.slm_bytes == 128 * 1024 and pvc.named_barriers == 32


@pytest.mark.parametrize("args,op", [
    ((16, 16, 8, 1), "load"), ((16, 16, 32, 2), "load"), ((8, 32, 32, 2), "load"), ((8, 16, 32, 4), "load"),
    ((32, 8, 16, 2), "load"), ((32, 16, 8, 1), "load"), ((16, 16, 16, 2), "load_transform"),
    ((8, 16, 32, 4), "load_transform"), ((32, 8, 16, 1), "load_transpose"), ((32, 8, 32, 1), "load_transpose"),
    ((32, 16, 8, 1), "store"), ((16, 16, 8, 1), "store"), ((16, 16, 32, 2), "prefetch"),
])
def test_legal_block_shapes(args, op):
    assert check_block_shape(get_target("pvc"), *args, op=op) is None


@pytest.mark.parametrize("args,op,why", [
    ((16, 32, 8, 2), "load", "128 bytes per row exceeds 64"),
    ((32, 16, 8, 4), "load", "at most 2 blocks"),
    ((16, 16, 64, 1), "load", "height 64 exceeds 32"),
    ((16, 12, 8, 1), "load", "not a power of two"),
    ((32, 16, 16, 1), "load_transform", "VNNI"),
    ((16, 16, 16, 1), "load_transpose", "32-bit pairs"),
    ((32, 16, 16, 1), "load_transpose", "width 16 exceeds 8"),
    ((32, 16, 16, 1), "store", "height 16 exceeds 8"),
    ((16, 16, 8, 2), "store", "at most 1"),
])
def test_illegal_block_shapes_say_why(args, op, why):
    reason = check_block_shape(get_target("pvc"), *args, op=op)
    assert reason is not None and why in reason, reason


def test_block_surface():
    pvc = get_target("pvc")
    assert check_block_surface(pvc, 16, base_alignment=64, width_bytes=256, height=10, pitch_bytes=256,
                               x_alignment=2) is None
    assert "aligned" in check_block_surface(pvc, 16, base_alignment=16)
    assert "multiple of 16" in check_block_surface(pvc, 16, pitch_bytes=200)
    assert "smaller than the width" in check_block_surface(pvc, 16, width_bytes=256, pitch_bytes=128)
    assert "width 32 bytes" in check_block_surface(pvc, 16, width_bytes=32)
    assert "x coordinate" in check_block_surface(pvc, 8, x_alignment=2)
