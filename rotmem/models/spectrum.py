"""The temporal spectrum: learned rotation speed ``s`` (rad/day) and frequency base."""

from __future__ import annotations

import math

import torch
from torch import nn

from rotmem.ops import reference


class TemporalSpectrum(nn.Module):
    """``theta_j = alpha * s * (tau - tau0) * base^(-j/n)`` for ``n`` complex dimensions.

    ``log_s`` (init ``ln(init_s)``, ``s`` in radians per day) and ``log_base`` (init
    ``ln(init_base)``) are the only learned values; ``tau0`` (days since 1970-01-01) is a plain
    float (no ``.item()`` call breaks a compiled graph) kept in the state dict as extra state.
    """

    def __init__(self, n: int, tau0: float = 0.0, init_s: float = 1.0, init_base: float = 10000.0):
        super().__init__()
        self.n = n
        self.log_s = nn.Parameter(torch.tensor(math.log(init_s)))
        self.log_base = nn.Parameter(torch.tensor(math.log(init_base)))
        self.tau0 = float(tau0)

    def get_extra_state(self) -> dict[str, float]:
        return {"tau0": self.tau0}

    def set_extra_state(self, state: dict[str, float]) -> None:
        self.tau0 = float(state["tau0"])

    @property
    def s(self) -> torch.Tensor:
        """Rotation speed in radians per day (clamped to >= 1e-9)."""
        return torch.exp(self.log_s.clamp(min=reference.LOG_S_MIN))

    @property
    def base(self) -> torch.Tensor:
        return torch.exp(self.log_base.clamp(min=reference.LOG_BASE_MIN))

    def forward(self, alpha: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        """Angles ``[*tau.shape, n]`` in radians; ``alpha`` broadcasts against ``tau`` (days).

        Days and angles are at least float32: bfloat16 would round days near 16,000 to 64-day steps.
        """
        tau = tau.to(torch.promote_types(self.log_s.dtype, torch.float32))
        return reference.angles(alpha, tau, self.log_s, self.log_base, self.tau0, self.n)
