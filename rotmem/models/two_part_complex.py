"""The ComplEx backbone TNTComplEx and RoMemComplEx share: a relation made of a time-dependent and
a time-independent part.

``f(h, r, t | τ) = Re( Σ_j h_j · (d_r(τ)_j + s_rj) · conj(t_j) )`` over ``n`` complex dims in the
split-halves layout (``x[..., :n]`` real parts, ``x[..., n:]`` imaginary parts). A family says
what ``d_r(τ)`` is (``relation_parts``); the query, the score and tkbc's N3 follow from it.
"""

from __future__ import annotations

import torch

from rotmem import ops
from rotmem.models.base import TemporalKGE, both_directions
from rotmem.ops.table_grad import gather_rows


def complex_product(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Elementwise complex product of split-halves tensors ``[..., 2n]``."""
    n = x.shape[-1] // 2
    xr, xi, yr, yi = x[..., :n], x[..., n:], y[..., :n], y[..., n:]
    return torch.cat([xr * yr - xi * yi, xr * yi + xi * yr], dim=-1)


class TwoPartComplEx(TemporalKGE):
    """A ComplEx scorer whose relation row is ``d_r(τ) + s_r``; subclasses own ``entity [N, 2n]``
    and define ``relation_parts``."""

    def relation_parts(
        self, r: torch.Tensor, tau: torch.Tensor, head: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(d_r(τ), s_r)``, each ``[..., 2n]``, for relation ids ``r`` and days ``tau`` (the
        reciprocal relation's rows where ``head``)."""
        raise NotImplementedError

    def _query(
        self, e: torch.Tensor, r: torch.Tensor, tau: torch.Tensor, head: torch.Tensor, sparse_grad: bool
    ) -> torch.Tensor:
        timed, static = self.relation_parts(r, tau, head)
        return complex_product(gather_rows(self.entity, e, sparse_grad), timed + static)

    def embedding_score(
        self,
        h: torch.Tensor,
        r: torch.Tensor,
        t: torch.Tensor,
        tau: torch.Tensor,
        sparse_grad: bool = False,
    ) -> torch.Tensor:
        """``f(h, r, t | τ)`` without the history: ``[B]`` for ``tau [B]``, ``[B, J]`` for ``[B, J]``."""
        e_h, e_t = gather_rows(self.entity, h, sparse_grad), gather_rows(self.entity, t, sparse_grad)
        if tau.dim() == r.dim() + 1:  # several times per fact
            r, e_h, e_t = r.unsqueeze(-1).expand(tau.shape), e_h.unsqueeze(-2), e_t.unsqueeze(-2)
        timed, static = self.relation_parts(r, tau, torch.zeros_like(r, dtype=torch.bool))
        return (complex_product(e_h, timed + static) * e_t).sum(-1)

    def regularizer(
        self, facts: torch.Tensor, kind: str = "modulus3", sparse_grad: bool = False
    ) -> torch.Tensor:
        """tkbc's N3 over both directions' queries: ``Σ |2^⅓ e_h|³ + |d_r(τ)|³ + |s_r|³ + |2^⅓ e_t|³``
        (pair moduli for ``"modulus3"``), divided by the number of queries ``2B``."""
        ends, rels, days, head = both_directions(facts)
        timed, static = self.relation_parts(rels, days, head)
        ends = gather_rows(self.entity, ends, sparse_grad) * 2 ** (1 / 3)
        # each of these entity rows is one query's left side and the other query's right side
        total = 2 * ops.n3([ends], kind=kind) + ops.n3([timed, static], kind=kind)
        return total / (2 * facts.shape[0])


def read_day_table(table: torch.Tensor, tau: torch.Tensor, tau0: float) -> torch.Tensor:
    """Rows of a per-day table ``[days, 2n]`` (row 0 is day ``tau0``) at days ``tau [...]``:
    ``[..., 2n]``, linear between neighbouring days, the nearest end past the range."""
    position = (tau.double() - tau0).clamp(0, table.shape[0] - 1)
    below = position.floor().long()
    above = (below + 1).clamp(max=table.shape[0] - 1)
    weight = (position - below).to(table.dtype).unsqueeze(-1)
    low, high = table[below], table[above]
    return low + weight * (high - low)


def day_table_smoothness(table: torch.Tensor) -> torch.Tensor:
    """tkbc's Lambda3 smoothness of a per-day table: ``Σ_τ |T(τ+1) − T(τ)|³`` (pair moduli) over
    ``days − 1`` (zero, with a gradient, for a one-day table)."""
    if table.shape[0] < 2:
        return table.sum() * 0
    return ops.n3([table[1:] - table[:-1]], kind="modulus3") / (table.shape[0] - 1)
