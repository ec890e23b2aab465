import os
import subprocess
import sys

import pytest

from xejit.errors import DeviceError
from xejit.runtime import default_device, detect_target, devices, get_device


def test_default_device_is_the_cpu_runtime_here():
    d = default_device()
    assert d in devices() or any(x.filter_string == d.filter_string for x in devices())
    # No GPU on the machines this runs on: the OpenCL CPU device, compiled for as `generic`.
    if not any(x.kind == "gpu" for x in devices()):
        assert d.backend == "opencl" and d.kind == "cpu" and d.target == "generic"
        assert 16 in d.sub_group_sizes


@pytest.mark.parametrize("name,gpu,target", [
    ("Intel(R) Data Center GPU Max 1550", True, "pvc"),
    ("Intel(R) Arc(TM) B580 Graphics", True, "bmg"),
    ("Intel(R) Arc(TM) 140V GPU (16GB)", True, "lnl"),
    ("Intel(R) Arc(TM) A770 Graphics", True, "dg2"),
    ("Intel(R) Data Center GPU Flex 170", True, "dg2"),
    ("Intel(R) UHD Graphics 770", True, "generic"),
    ("AMD EPYC 9R14", False, "generic"),
    ("Intel(R) Arc(TM) A770 Graphics", False, "generic"),  # a GPU name on a non-GPU device
])
def test_target_detection(name, gpu, target):
    assert detect_target(name, gpu) == target


def test_filter_string_selects_and_bad_filter_is_a_clear_error():
    assert get_device("opencl:cpu").kind == "cpu"
    with pytest.raises(DeviceError, match="no device matches the filter 'level_zero:gpu:7'"):
        get_device("level_zero:gpu:7")


def test_missing_device_in_a_fresh_process_is_a_clear_error():
    env = dict(os.environ, XEJIT_DEVICE="level_zero:gpu")
    code = "import xejit.runtime as r\ntry:\n r.default_device()\nexcept r.device.DeviceError as e: print('ERR', e)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "ERR no device matches the filter 'level_zero:gpu'" in out.stdout


def test_info_command_lists_devices_targets_and_probed_features():
    out = subprocess.run([sys.executable, "-m", "xejit", "info"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "target generic" in out.stdout or "target pvc" in out.stdout
    assert "cl_intel_subgroups   yes" in out.stdout
    if "cpu" in out.stdout and "gpu" not in out.stdout:
        assert "DPAS                 no" in out.stdout
