"""``GrowingArray``: a NumPy array that grows at its end, for tables that gain a few rows at a time
(an index's int8 copy, BM25's postings): the capacity at least doubles when full, so appends cost
amortised O(1), and ``values`` is a view of the filled rows, never a copy."""

from __future__ import annotations

import numpy as np


class GrowingArray:
    """Rows of shape ``row_shape`` and type ``dtype``, appended one (``append``) or a block
    (``extend``) at a time (module docs)."""

    def __init__(self, dtype: type | np.dtype, row_shape: tuple[int, ...] = ()):
        self._data = np.zeros((0, *row_shape), dtype=dtype)
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def _reserve(self, end: int) -> None:
        if end > len(self._data):
            grown = np.zeros((max(end, 2 * len(self._data)), *self._data.shape[1:]), dtype=self._data.dtype)
            grown[: self.size] = self._data[: self.size]
            self._data = grown

    def append(self, value: float) -> None:
        """Add one row (a scalar for 1-d arrays)."""
        self._reserve(self.size + 1)
        self._data[self.size] = value
        self.size += 1

    def extend(self, rows: np.ndarray) -> None:
        """Add the rows of ``rows [m, *row_shape]``."""
        end = self.size + len(rows)
        self._reserve(end)
        self._data[self.size : end] = rows
        self.size = end

    def clear(self) -> None:
        """Hold no rows (the capacity is kept)."""
        self.size = 0

    @property
    def values(self) -> np.ndarray:
        """The rows held, ``[size, *row_shape]`` (a view)."""
        return self._data[: self.size]
