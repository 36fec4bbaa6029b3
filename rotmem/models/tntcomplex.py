"""TNTComplEx (Lacroix et al., ICLR 2020; tkbc): ComplEx with a per-day embedding that modulates
a time-dependent part of each relation, beside a time-independent part.

``f(h, r, t | τ) = Re( Σ_j h_j · (r_j · T(τ)_j + r'_j) · conj(t_j) )`` over ``n`` complex dims
(split-halves layout). Head queries use reciprocal relations, as tkbc does: ``(?, r, t, τ)`` is
asked as ``(t, r⁻¹, ?, τ)`` with its own relation rows ``R + r``.

``T(τ)`` is a table with one row per day of the training range ``[tau0, tau0 + num_days)``.
A fractional day is read by linear interpolation between its two neighbouring days; a day before
or after the range reads the range's first or last day (tkbc has no rule: it only scores days it
has a row for). Days inside the range that no training fact has keep rows that only the
smoothness penalty (``time_regularizer``) moves, towards their neighbours.

``TemporalKGE.attach_history`` adds the history term every family can take
(``rotmem.models.history``): ``f + H(h, r, t, τ)``.
"""

from __future__ import annotations

import torch
from torch import nn

from rotmem.models.two_part_complex import (
    TwoPartComplEx,
    complex_product,
    day_table_smoothness,
    read_day_table,
)


class TNTComplEx(TwoPartComplEx):
    """TNTComplEx with ``dim = 2 · rank`` real coordinates per row (tkbc's rank 128 is ``dim=256``).

    Tables: ``entity [N, 2n]``, ``rel_time [2R, 2n]`` (the part ``T(τ)`` modulates),
    ``rel_static [2R, 2n]``, ``time [days, 2n]``; normal init times ``init_scale`` (tkbc: 1e-2).
    """

    family = "tntcomplex"

    def __init__(
        self,
        num_entities: int,
        num_relations: int,
        dim: int = 256,
        tau0: float = 0.0,
        num_days: int = 1,
        init_scale: float = 1e-2,
    ):
        super().__init__()
        if dim < 2 or num_days < 1:
            raise ValueError(f"TNTComplEx needs dim >= 2 and num_days >= 1, got {dim} and {num_days}")
        self.config = dict(
            num_entities=num_entities,
            num_relations=num_relations,
            dim=dim,
            tau0=float(tau0),
            num_days=num_days,
            init_scale=init_scale,
        )
        self.n = dim // 2

        def table(rows: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(rows, 2 * self.n) * init_scale)

        self.entity = table(num_entities)
        self.rel_time = table(2 * num_relations)
        self.rel_static = table(2 * num_relations)
        self.time = table(num_days)
        self.tau0 = float(tau0)

    def time_embedding(self, tau: torch.Tensor) -> torch.Tensor:
        """``T(τ)`` for days ``tau [...]``: ``[..., 2n]``, interpolated between days, clamped to the
        table's range (module docstring)."""
        return read_day_table(self.time, tau, self.tau0)

    def relation_parts(
        self, r: torch.Tensor, tau: torch.Tensor, head: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(r ⊙ T(τ), r')``, each ``[..., 2n]``, for relation ids ``r`` (reciprocal where ``head``)."""
        rows = r + head.long() * self.num_relations
        return complex_product(self.rel_time[rows], self.time_embedding(tau)), self.rel_static[rows]

    def time_regularizer(self) -> torch.Tensor:
        """tkbc's Lambda3 smoothness: ``Σ_τ |T(τ+1) − T(τ)|³`` (pair moduli) over ``days − 1``."""
        return day_table_smoothness(self.time)
