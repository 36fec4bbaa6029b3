"""Range checks of the training settings, so ``rotmem fit --model.lr -1`` or ``--data.batch_size 0``
ends in one line naming the setting (``rotmem.errors.BadSettingError``, exit code 2) instead of a
traceback from deep inside the optimiser or the data loader."""

from __future__ import annotations

from rotmem.errors import BadSettingError


def check_settings(
    group: str,
    positive: dict[str, float] | None = None,
    non_negative: dict[str, float] | None = None,
    at_least_one: dict[str, int] | None = None,
) -> None:
    """``BadSettingError`` naming ``group.name`` for the first value out of its range: ``positive``
    (> 0; NaN fails), ``non_negative`` (>= 0) or ``at_least_one`` (an integer count >= 1)."""
    for name, value in (positive or {}).items():
        if not value > 0:
            raise BadSettingError(f"{group}.{name} must be positive, got {value}")
    for name, value in (non_negative or {}).items():
        if not value >= 0:
            raise BadSettingError(f"{group}.{name} must be zero or more, got {value}")
    for name, value in (at_least_one or {}).items():
        if not value >= 1:
            raise BadSettingError(f"{group}.{name} must be at least 1, got {value}")
