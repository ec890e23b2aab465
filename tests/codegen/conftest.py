"""Compiler tests run kernels on the device, never in the interpreter."""
import pytest


@pytest.fixture(autouse=True)
def _device_path(monkeypatch):
    monkeypatch.delenv("XEJIT_INTERPRET", raising=False)
    yield
