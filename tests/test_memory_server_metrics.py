"""The encoder's batch sizes (``Batcher.batch_sizes``, ``GET /metrics`` through a real HTTP client on
a real uvicorn server) and its ``device`` setting (library, ``rotmem serve --device``)."""

from __future__ import annotations

import re
import threading
import time

import pytest
import torch

httpx = pytest.importorskip("httpx", reason='the server tests need httpx: pip install "rotmem[server]"')
pytest.importorskip("uvicorn", reason='the server tests need uvicorn: pip install "rotmem[server]"')

from rotmem.cli import main  # noqa: E402
from rotmem.memory import HashingEncoder  # noqa: E402
from rotmem.memory.encoder import SentenceEncoder, resolve_device  # noqa: E402
from rotmem.server.batching import Batcher  # noqa: E402
from rotmem.server.keys import KeyRing  # noqa: E402
from rotmem.server.pool import MemoryPool  # noqa: E402
from tests.test_memory_server import run_server  # noqa: E402


class SlowEncoder(HashingEncoder):
    """Takes 50 ms per model call (so concurrent requests queue behind one) and counts its calls."""

    def __init__(self):
        super().__init__(32)
        self.calls: list[int] = []

    def encode(self, texts):
        self.calls.append(len(texts))
        time.sleep(0.05)
        return super().encode(texts)


def histogram(text: str) -> dict[str, float]:
    """``le -> cumulative count`` plus ``sum`` and ``count`` of ``rotmem_encoder_batch_size``."""
    out = {
        m[1]: float(m[2])
        for m in re.finditer(r'rotmem_encoder_batch_size_bucket\{le="([^"]+)"\} (\S+)', text)
    }
    for key in ("sum", "count"):
        out[key] = float(re.search(rf"^rotmem_encoder_batch_size_{key} (\S+)$", text, re.M)[1])
    return out


def test_a_batcher_counts_the_batch_sizes_it_ran():
    batcher = Batcher(lambda items: items, max_batch=4)
    batcher.submit([1, 2, 3])
    batcher.submit([4])
    batcher.submit([5, 6, 7, 8, 9])  # over max_batch: runs alone
    assert batcher.batch_sizes() == {3: 1, 1: 1, 5: 1}


def test_metrics_count_every_encoder_call_of_searches_and_adds(tmp_path):
    inner = SlowEncoder()
    pool = MemoryPool(str(tmp_path), inner, retriever="temporal")
    ring = KeyRing()
    token = ring.add("alice")
    server, thread, url = run_server(pool, ring, 1 << 20)
    try:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
            facts = [{"subject": "Ann", "relation": "lives in", "object": o} for o in ("Rome", "Oslo")]
            assert client.post(
                "/v1/sessions", json={"session_id": "s1", "date": 19000, "facts": facts}
            ).is_success
            # the add's 2 facts were embedded in one call before the namespace lock; the store's own
            # encode under the lock reused them (no second call)
            assert inner.calls == [2]
            answered: list[int] = []

            def ask(i: int) -> None:
                with httpx.Client(base_url=url, headers=headers, timeout=30) as own:
                    answered.append(
                        own.post("/v1/search", json={"question": f"where is Ann {i}"}).status_code
                    )

            threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
            for one in threads:
                one.start()
            for one in threads:
                one.join(timeout=60)
            assert answered == [200] * 8
        response = httpx.get(f"{url}/metrics", timeout=30)  # no key needed: counts only
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
        assert "alice" not in response.text and 'rotmem_encoder_info{device="cpu"} 1' in response.text
        assert re.search(r"^rotmem_encoder_max_batch 8$", response.text, re.M)  # the CPU's default cap
        counts = histogram(response.text)
        # every text the model saw: 2 facts and 8 questions (`--retriever temporal`; the default,
        # `best`, embeds each new relation once more for its time constraint)
        assert counts["sum"] == sum(inner.calls) == 10
        assert counts["count"] == len(inner.calls) < 10  # the 8 concurrent questions shared calls
        assert counts["2"] >= 1 and counts["+Inf"] == counts["count"] == counts["64"]
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        pool.close()


def test_the_encoder_device_setting_resolves_or_refuses_in_one_line(monkeypatch):
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device(None) == resolve_device("auto") and resolve_device("cpu") == "cpu"
    assert SentenceEncoder(device="cpu").device == "cpu"  # the model itself loads on first encode
    with pytest.raises(ValueError, match=r"^encoder device 'tpu' is not one of auto, cpu, cuda$"):
        SentenceEncoder(device="tpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"
    with pytest.raises(ValueError, match="encoder device 'cuda': no CUDA GPU is available here"):
        resolve_device("cuda")


def test_rotmem_serve_refuses_a_bad_device_in_one_line(tmp_path, capsys, monkeypatch):
    keys = tmp_path / "keys.json"
    assert main(["serve", "--keys", str(keys), "--add-key", "alice"]) == 0
    capsys.readouterr()
    serve = ["serve", "--keys", str(keys), "--store", str(tmp_path), "--encoder", "hashing", "--device"]
    assert main([*serve, "gpu0"]) == 2
    assert (
        capsys.readouterr().err
        == "rotmem serve: error: encoder device 'gpu0' is not one of auto, cpu, cuda\n"
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main([*serve, "cuda"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "encoder device 'cuda': no CUDA GPU is available" in err
