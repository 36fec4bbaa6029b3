"""RoMem: complex entity embeddings rotated by a relation-conditioned function of time."""

from __future__ import annotations

import warnings

import torch
from torch import nn

from rotmem import ops
from rotmem.models.base import TemporalKGE, as_days
from rotmem.models.spectrum import TemporalSpectrum
from rotmem.models.speeds import RelationSpeed
from rotmem.ops.table_grad import gather_rows

BACKBONES = ("chronor", "distmult")
# Beyond this many days from tau0 a float32 angle alpha * s * (tau - tau0) * omega keeps fewer than
# 2^24 / 8192 = 2048 steps per radian at s = 1 rad/day: about 5e-4 rad of rounding, against the
# per-day rotation it has to resolve. A tau0 within the data (Phase 2: the first training day)
# keeps ICEWS05-15's 4017 days below it; tau0 = 0 puts its days 12,784-16,800 above it.
FLOAT32_DAY_RANGE = 8192.0


def complex_dims(dim: int, k: int) -> int:
    """``n = k * floor(dim / (2k))`` complex dimensions for a total real width ``dim``."""
    n = k * (dim // (2 * k))
    if n < 1:
        raise ValueError(f"dim={dim} with k={k} leaves no complex dimension")
    return n


class RoMem(TemporalKGE):
    """The RoMem temporal KG embedding (ROMEM.md), kept as the paper defines it.

    Tables: ``entity [N, 2n]``, ``w [R, 2n]`` and, for the ChronoR backbone, ``w_hat [R, 2n]``
    (split-halves complex layout). Indices are int64 tensors; ``tau`` is days since 1970-01-01.
    The history term any family can take is attached after construction
    (``TemporalKGE.attach_history``); the paper's model has none.
    """

    family = "romem"

    def __init__(
        self,
        num_entities: int,
        num_relations: int,
        dim: int = 500,
        k: int = 3,
        backbone: str = "chronor",
        speed: str = "constant",
        init_scale: float = 0.4,
        tau0: float = 0.0,
        init_s: float = 1.0,
        init_base: float = 10000.0,
    ):
        super().__init__()
        if backbone not in BACKBONES:
            raise ValueError(f"unknown backbone {backbone!r}; expected one of {BACKBONES}")
        self.config = dict(
            num_entities=num_entities,
            num_relations=num_relations,
            dim=dim,
            k=k,
            backbone=backbone,
            speed=speed,
            init_scale=init_scale,
            tau0=tau0,
            init_s=init_s,
            init_base=init_base,
        )
        self.n = complex_dims(dim, k)
        self.backbone = backbone

        def table(rows: int) -> nn.Parameter:
            return nn.Parameter(torch.empty(rows, 2 * self.n).uniform_(-init_scale, init_scale))

        self.entity = table(num_entities)
        self.w = table(num_relations)
        self.w_hat = table(num_relations) if backbone == "chronor" else None
        self.spectrum = TemporalSpectrum(self.n, tau0=tau0, init_s=init_s, init_base=init_base)
        self.speed = RelationSpeed(num_relations, source=speed)
        self._days_checked = False

    @property
    def tau0(self) -> float:
        return self.spectrum.tau0

    # --- time -------------------------------------------------------------------------------
    def alpha(self, r: torch.Tensor) -> torch.Tensor:
        """Rotation speeds ``alpha_r`` in (0, 1] for relation ids ``r``."""
        return self.speed(r)

    def theta(self, r: torch.Tensor, tau: torch.Tensor | float) -> torch.Tensor:
        """Angles ``[B, n]`` (radians) for relations ``r [B]`` at days ``tau [B]``."""
        return self.spectrum(self.alpha(r), as_days(tau, r))

    # --- queries ----------------------------------------------------------------------------
    def check_day_range(self, tau: torch.Tensor) -> None:
        """Warn (once per model) when float32 angles are asked for days far from tau0."""
        if self._days_checked or torch.compiler.is_compiling() or tau.numel() == 0:
            return
        self._days_checked = True
        if torch.promote_types(self.entity.dtype, torch.float32) != torch.float32:
            return  # float64 angles
        far = float((tau.detach().double() - self.tau0).abs().max())
        if far > FLOAT32_DAY_RANGE:
            warnings.warn(
                f"RoMem: days up to {far:,.0f} from tau0={self.tau0:g}; float32 angles there carry about "
                f"{far * 2**-24:.1e} x s rad of rounding. Set tau0 to a day near the data "
                f"(RoMem(..., tau0=kg.first_day); Phase 2 does), or use float64.",
                RuntimeWarning,
                stacklevel=3,
            )

    def _query(
        self, e: torch.Tensor, r: torch.Tensor, tau: torch.Tensor, head: torch.Tensor, sparse_grad: bool
    ) -> torch.Tensor:
        # f is symmetric in h and t: a head query is built as a tail query from the tail.
        # Days stay at least float32: bfloat16 rounds days near 16,000 to 64-day steps.
        self.check_day_range(tau)
        return ops.unrotated_query_indexed(
            self.entity,
            self.w,
            self.w_hat,
            e,
            r,
            tau.to(torch.promote_types(self.entity.dtype, torch.float32)),
            self.alpha(r),
            self.spectrum.log_s,
            self.spectrum.log_base,
            self.tau0,
            sparse_grad,
        )

    # --- scores -----------------------------------------------------------------------------
    def relation_vector(self, r: torch.Tensor) -> torch.Tensor:
        """The real diagonal ``w_r * w_hat_r`` (ChronoR) or ``w_r`` (DistMult): ``[..., 2n]``."""
        return self.w[r] if self.w_hat is None else self.w[r] * self.w_hat[r]

    def embedding_score(
        self,
        h: torch.Tensor,
        r: torch.Tensor,
        t: torch.Tensor,
        tau: torch.Tensor,
        sparse_grad: bool = False,
    ) -> torch.Tensor:
        """Direct score ``sum_i Rot(e_h, theta)_i * w_i * w_hat_i * Rot(e_t, theta)_i``: ``[B]``.

        ``tau`` may be ``[B]`` or ``[B, J]`` (then the result is ``[B, J]``: one score per time).
        ``sparse_grad``: the entity table's gradient is sparse (``rotmem.ops.table_grad``).
        """
        self.check_day_range(tau)
        e_h, e_t = gather_rows(self.entity, h, sparse_grad), gather_rows(self.entity, t, sparse_grad)
        alpha, rel = self.alpha(r), self.relation_vector(r)
        if tau.dim() == r.dim() + 1:  # several times per fact
            alpha, e_h, e_t, rel = alpha[..., None], e_h[..., None, :], e_t[..., None, :], rel[..., None, :]
        theta = self.spectrum(alpha, tau)
        return (ops.rotate(e_h, theta) * rel * ops.rotate(e_t, theta)).sum(-1)

    def regularizer(self, facts: torch.Tensor, kind: str = "l4", sparse_grad: bool = False) -> torch.Tensor:
        """``(Σ|e_h|⁴ + Σ|w_r|⁴ + Σ|ŵ_r|⁴ + Σ|e_t|⁴) / B`` over the batch's rows (``kind="l4"``), or
        the same with tkbc's cubed pair modulus (``kind="modulus3"``)."""
        h, r, t, _ = facts.unbind(1)
        # one gather per table; index_select's backward (index_add) is ~2.5x faster than indexing's
        rows = [gather_rows(self.entity, torch.cat([h, t]), sparse_grad), self.w.index_select(0, r)]
        if self.w_hat is not None:
            rows.append(self.w_hat.index_select(0, r))
        return ops.n3(rows, kind=kind) / facts.shape[0]
