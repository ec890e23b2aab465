import pytest

from tests.matmul.backend import use_backend


@pytest.fixture(autouse=True)
def _backend_and_cache(monkeypatch, tmp_path_factory):
    use_backend(monkeypatch)
    monkeypatch.setenv("XEJIT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "xejit-cache"))
