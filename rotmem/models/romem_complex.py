"""RoMem on a ComplEx backbone: the paper's relation-conditioned rotation in time, made to count.

Why not the ChronoR backbone: there ``f = Σ_i Rot(e_h, θ)_i · (w ⊙ ŵ)_i · Rot(e_t, θ)_i`` rotates
head and tail together against a real diagonal, so per complex pair the score is
``½|h||t|[(w_re + w_im) cos(φ_h − φ_t) + (w_re − w_im) cos(φ_h + φ_t + 2θ)]``: time only moves the
second term, which vanishes wherever a relation's two weights are equal, and ``f(h, r, t) =
f(t, r, h)`` for every relation, so "A visits B" scores as "B visits A".

This family keeps RoMem's functional time and puts it where it cannot cancel. Per complex pair,
with reciprocal relations for head queries (as tkbc does):

``f(h, r, t | τ) = Re( Σ_j h_j · (s_rj + d_rj · e^{iθ_r(τ)_j} · u(τ)_j) · conj(t_j) ) + H(h, r, t, τ)``

- ``θ_r(τ)_j = α_r · s · (τ − τ₀) · base^(−j/n)``: RoMem's spectrum and speeds (constant, learned
  or the Semantic Speed Gate), so any real day can be scored and static relations (α → 0) do not
  rotate;
- ``s_r`` (static) and ``d_r`` (dynamic) relation rows, as in TNTComplEx;
- ``u(τ)`` (``day_table``): an optional per-day modulation of the rotation (``u = 1`` without
  it), one row per day of the training range, read by linear interpolation between days and, past
  the range, the nearest end (as ``TNTComplEx.time_embedding``), kept smooth by
  ``time_regularizer``; with it the dynamic part can do what TNTComplEx's per-day table does, and
  past the range the rotation still turns;
- ``H`` (``TemporalKGE.attach_history``, a ``HistorySpec``'s windows): an optional term from the
  training facts themselves (``rotmem.models.history``): how often ``(h, r, t)`` happened, and how
  often ``h`` and ``t`` interacted in any relation (and in each relation), within each window of
  ``τ``; its ``causal`` and ``eval_splits`` make it count only earlier days and know later splits'
  facts at evaluation (temporal extrapolation).

``hold_rotation``: past the training range the rotation stays where it was on the range's first or
last day (as the day table and TNTComplEx's per-day table do) instead of turning on; without it a
day far past the range turns every frequency to a phase never trained.
"""

from __future__ import annotations

import torch
from torch import nn

from rotmem.models.spectrum import TemporalSpectrum
from rotmem.models.speeds import RelationSpeed
from rotmem.models.two_part_complex import (
    TwoPartComplEx,
    complex_product,
    day_table_smoothness,
    read_day_table,
)


class RoMemComplEx(TwoPartComplEx):
    """RoMem's rotation on a ComplEx/TNT backbone (module docstring); ``dim = 2n`` real coordinates.

    Tables: ``entity [N, 2n]``, ``rel_static``, ``rel_dynamic [2R, 2n]``, optional ``day [days, 2n]``;
    all normal init times ``init_scale``.
    """

    family = "romem-complex"

    def __init__(
        self,
        num_entities: int,
        num_relations: int,
        dim: int = 256,
        tau0: float = 0.0,
        num_days: int = 1,
        speed: str = "constant",
        init_s: float = 0.01,
        init_base: float = 10000.0,
        init_scale: float = 1e-2,
        day_table: bool = False,
        hold_rotation: bool = False,
    ):
        super().__init__()
        if dim < 2:
            raise ValueError(f"dim must be at least 2, got {dim}")
        self.config = dict(
            num_entities=num_entities,
            num_relations=num_relations,
            dim=dim,
            tau0=tau0,
            num_days=num_days,
            speed=speed,
            init_s=init_s,
            init_base=init_base,
            init_scale=init_scale,
            day_table=day_table,
            hold_rotation=hold_rotation,
        )
        self.n = dim // 2

        def table(rows: int, scale: float = init_scale) -> nn.Parameter:
            return nn.Parameter(torch.randn(rows, 2 * self.n) * scale)

        self.entity = table(num_entities)
        self.rel_static = table(2 * num_relations)
        self.rel_dynamic = table(2 * num_relations)
        self.day = table(num_days) if day_table else None
        self.spectrum = TemporalSpectrum(self.n, tau0=tau0, init_s=init_s, init_base=init_base)
        self.speed = RelationSpeed(num_relations, source=speed)

    @property
    def tau0(self) -> float:
        return self.spectrum.tau0

    # --- time -------------------------------------------------------------------------------
    def alpha(self, r: torch.Tensor) -> torch.Tensor:
        """Rotation speeds ``alpha_r`` for relation ids ``r`` (reciprocals share their relation's)."""
        return self.speed(r % self.num_relations)

    def day_embedding(self, tau: torch.Tensor) -> torch.Tensor:
        """``u(τ) [..., 2n]``: the per-day table, interpolated between days, clamped past the range."""
        return read_day_table(self.day, tau, self.tau0)

    def dynamic_part(self, rows: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        """``d_r ⊙ e^{iθ_r(τ)} ⊙ u(τ)`` for relation rows ``rows`` (``R + r`` reciprocal)."""
        turned = tau
        if self.config["hold_rotation"]:
            turned = tau.clamp(self.tau0, self.tau0 + self.config["num_days"] - 1)
        theta = self.spectrum(self.alpha(rows), turned)
        turn = torch.cat([torch.cos(theta), torch.sin(theta)], dim=-1).to(self.rel_dynamic.dtype)
        if self.day is not None:
            turn = complex_product(turn, self.day_embedding(tau))
        return complex_product(self.rel_dynamic[rows], turn)

    def relation_parts(
        self, r: torch.Tensor, tau: torch.Tensor, head: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(dynamic, static)`` relation vectors ``[..., 2n]`` (reciprocal rows where ``head``)."""
        rows = r + head.long() * self.num_relations
        return self.dynamic_part(rows, tau), self.rel_static[rows]

    def time_regularizer(self) -> torch.Tensor | None:
        """Lambda3 smoothness of the per-day table: ``Σ_τ |u(τ+1) − u(τ)|³ / (days − 1)``."""
        if self.day is None:
            return None
        return day_table_smoothness(self.day)
