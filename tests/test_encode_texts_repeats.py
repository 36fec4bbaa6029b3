"""``encode_texts`` embeds a repeated text once and hands every occurrence its row."""

from __future__ import annotations

import numpy as np

from rotmem.memory.encoder import HashingEncoder, encode_texts


class Counting(HashingEncoder):
    def __init__(self):
        super().__init__(16)
        self.seen: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.seen += texts
        return super().encode(texts)


def test_repeated_texts_are_embedded_once() -> None:
    encoder = Counting()
    texts = ["a visits b", "c praises d", "a visits b", "e", "c praises d"]
    out = encode_texts(encoder, texts, batch_size=2)
    assert sorted(encoder.seen) == ["a visits b", "c praises d", "e"]
    # rows re-normalised once more: equal to float32 rounding (a few ulp of a unit row)
    np.testing.assert_allclose(out, HashingEncoder(16).encode(texts), atol=1e-6)
