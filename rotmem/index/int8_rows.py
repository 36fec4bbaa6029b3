"""An int8 copy of an index's float32 rows: what ``rotmem.ops.native.top_inner_products`` reads.

A flat search is bound by reading its rows. Row ``x_r`` (``D`` float32) is also kept as int8 codes
``c_r`` (-127..127) with a scale ``s_r = max|x_r| / 127``, so that ``x_r ≈ s_r c_r`` in a quarter
of the bytes, with two norms rounded up into float32: ``errors[r] >= |x_r - s_r c_r|`` and
``norms[r] >= |x_r|``. From them the kernel bounds how far its int8 estimate of a score can be from
the exact float32 score (``csrc/cpu/top_inner_products.cpp`` derives the bound next to the
arithmetic it covers), and rescores exactly every row the bound cannot rule out: the copy changes
which rows are read, never a result.

On 100k MiniLM sentence vectors (384, unit norm) ``|x_r - s_r c_r|`` is about 0.007, and the top
2048 of a question need about 2,450 rows rescored.
"""

from __future__ import annotations

import numpy as np

from rotmem.index.growing import GrowingArray


def _rounded_up(values: np.ndarray) -> np.ndarray:
    """float64 ``values`` (>= 0) as the nearest float32 at or above each, with room for the float64
    arithmetic that computed them."""
    values = values * (1 + 1e-9)
    rounded = values.astype(np.float32)
    return np.where(rounded < values, np.nextafter(rounded, np.float32(np.inf)), rounded).astype(np.float32)


def quantise(vectors: np.ndarray, chunk: int = 4096) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(codes [n, D] int8, scales [n], errors [n], norms [n])`` (float32) of finite float32
    ``vectors [n, D]`` (module docs), ``chunk`` rows at a time (the float64 work stays in cache).
    An all-zero row gets scale 0, codes 0 and error 0."""
    x = np.asarray(vectors, dtype=np.float32)
    parts = [_quantise_rows(x[start : start + chunk]) for start in range(0, len(x), chunk)]
    if not parts:
        parts = [_quantise_rows(x)]
    return tuple(np.concatenate(arrays) for arrays in zip(*parts, strict=True))


def _quantise_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    scales = (np.abs(x).max(axis=1, initial=0.0) / np.float32(127)).astype(np.float32)
    safe = np.where(scales > 0, scales, np.float32(1))
    codes = np.clip(np.rint(x / safe[:, None]), -127, 127).astype(np.int8)
    x64 = x.astype(np.float64)
    copy = codes.astype(np.float64) * scales.astype(np.float64)[:, None]  # s_r c_r, exact in float64
    errors = _rounded_up(np.linalg.norm(x64 - copy, axis=1))
    return codes, scales, errors, _rounded_up(np.linalg.norm(x64, axis=1))


class Int8Rows:
    """The int8 copy of a growing set of rows (module docs): ``append`` quantises only the new rows
    and the arrays grow by doubling (``GrowingArray``), so a store that gains a few rows per write
    copies nothing."""

    def __init__(self, dim: int):
        self.dim = int(dim)
        self._codes = GrowingArray(np.int8, (self.dim,))
        self._floats = [GrowingArray(np.float32) for _ in range(3)]  # scales, errors, norms

    def __len__(self) -> int:
        return len(self._codes)

    def append(self, vectors: np.ndarray) -> None:
        """Add the copies of ``vectors [m, D]`` (finite float32) after the rows held."""
        codes, *floats = quantise(vectors)
        self._codes.extend(codes)
        for array, new in zip(self._floats, floats, strict=True):
            array.extend(new)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Views of ``(codes [n, D] int8, scales [n], errors [n], norms [n])``."""
        return self._codes.values, *(array.values for array in self._floats)
