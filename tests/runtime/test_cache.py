import multiprocessing as mp
import os

from xejit.runtime.cache import MAGIC, Cache, key_of


def test_roundtrip_memory_and_disk(tmp_path):
    c = Cache(tmp_path)
    k = key_of("src", ("f32", 2), 16)
    assert c.get(k) is None
    c.put(k, b"payload")
    assert c.get(k) == b"payload"
    fresh = Cache(tmp_path)  # a new process would see the disk entry
    assert fresh.get(k) == b"payload" and fresh.hits == 1


def test_keys_separate_parts():
    assert key_of("ab", "c") != key_of("a", "bc")
    assert key_of(1) != key_of("1")


def test_corrupted_entry_is_detected_removed_and_rebuilt(tmp_path):
    c = Cache(tmp_path)
    k = key_of("x")
    c.put(k, b"good bytes")
    path = tmp_path / k[:2] / k
    blob = bytearray(path.read_bytes())
    blob[-1] ^= 0xFF
    path.write_bytes(bytes(blob))
    fresh = Cache(tmp_path)
    assert fresh.get(k) is None and fresh.corrupt == 1 and not path.exists()
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(MAGIC[:3])  # truncated
    assert Cache(tmp_path).get(k) is None
    fresh.put(k, b"rebuilt")
    assert Cache(tmp_path).get(k) == b"rebuilt"


def _writer(args):
    directory, i = args
    c = Cache(directory)
    payload = (b"%d" % i) * 50_000
    for _ in range(20):
        c.put(key_of("shared"), payload)
        got = Cache(directory).get(key_of("shared"))
        assert got is None or (len(got) % 50_000 == 0 and got == got[: len(got) // 50_000] * 50_000)
    return True


def test_concurrent_processes_never_see_a_partial_entry(tmp_path):
    with mp.get_context("spawn").Pool(4) as pool:
        assert all(pool.map(_writer, [(str(tmp_path), i) for i in range(8)]))
    leftovers = [p for p in (tmp_path).rglob(".tmp-*")]
    assert not leftovers
    assert Cache(tmp_path).get(key_of("shared")) is not None
    assert not os.listdir(tmp_path / key_of("shared")[:2]) == []
