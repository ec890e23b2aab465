import pytest

from tests.matmul.backend import ON_DEVICE, use_backend


@pytest.fixture(autouse=True)
def _backend_and_cache(monkeypatch, tmp_path_factory):
    use_backend(monkeypatch)
    monkeypatch.setenv("XEJIT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "xejit-cache"))
    monkeypatch.setenv("XEJIT_ATTENTION_TUNE_WARMUP_MS", "0")
    monkeypatch.setenv("XEJIT_ATTENTION_TUNE_REP_MS", "0")
    if ON_DEVICE:
        # every config tried is a driver build of 20 s or more on the CPU device: one per shape
        monkeypatch.setenv("XEJIT_ATTENTION_TUNE", "0")
