"""Pure-torch reference ops: the specification every backend must agree with.

Layout: a complex vector of ``n`` dimensions is a real tensor of length ``2n`` in split halves,
``[re_0 .. re_{n-1} | im_0 .. im_{n-1}]``. Angles are radians, times are days (see ROMEM.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from rotmem.ops.id_checks import check_ids
from rotmem.ops.rank_csr import check_filter_csr
from rotmem.ops.table_grad import gather_rows

LOG_S_MIN = -20.72326583694641  # ln(1e-9): s = exp(log_s) is clamped to >= 1e-9 per day
LOG_BASE_MIN = 0.6931471805599453  # ln(2): base = exp(log_base) is clamped to >= 2


def rotate(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Rotate each complex pair ``j`` of ``x [..., 2n]`` by ``theta [..., n]`` radians (broadcast)."""
    n = x.shape[-1] // 2
    re, im = x[..., :n], x[..., n:]
    cos, sin = torch.cos(theta), torch.sin(theta)
    return torch.cat([re * cos - im * sin, re * sin + im * cos], dim=-1)


def spectrum(log_base: torch.Tensor, n: int) -> torch.Tensor:
    """``omega_j = base^(-j/n)``, ``j = 0..n-1``: ``[n]`` relative frequencies."""
    j = torch.arange(n, device=log_base.device, dtype=log_base.dtype)
    return torch.exp(-log_base.clamp(min=LOG_BASE_MIN) * j / n)


def angles(
    alpha: torch.Tensor,
    tau: torch.Tensor,
    log_s: torch.Tensor,
    log_base: torch.Tensor,
    tau0: float,
    n: int,
) -> torch.Tensor:
    """``theta_j = alpha * s * (tau - tau0) * omega_j``: ``[B, n]`` radians.

    ``alpha [B]`` relation speeds in (0, 1), ``tau [B]`` days, ``log_s`` and ``log_base`` scalars.
    """
    speed = alpha * torch.exp(log_s.clamp(min=LOG_S_MIN)) * (tau - tau0)
    return speed.unsqueeze(-1) * spectrum(log_base, n)


def unrotated_query(
    h: torch.Tensor, w: torch.Tensor, w_hat: torch.Tensor | None, theta: torch.Tensor
) -> torch.Tensor:
    """``Rot(Rot(h, theta) * w * w_hat, -theta)``: ``[B, 2n]``, so that ``f(h,r,t|tau) = <q, e_t>``.

    ``w_hat=None`` is the DistMult backbone. The same formula gives the head query with ``h := e_t``.
    """
    relation = w if w_hat is None else w * w_hat
    return rotate(rotate(h, theta) * relation, -theta)


def unrotated_query_indexed(
    entity: torch.Tensor,
    w_table: torch.Tensor,
    w_hat_table: torch.Tensor | None,
    ent_idx: torch.Tensor,
    rel_idx: torch.Tensor,
    tau: torch.Tensor,
    alpha: torch.Tensor,
    log_s: torch.Tensor,
    log_base: torch.Tensor,
    tau0: float,
    sparse_grad: bool = False,
) -> torch.Tensor:
    """Gather rows, compute angles and build the unrotated query: ``[B, 2n]``.

    ``entity [N, 2n]``, ``w_table``/``w_hat_table [R, 2n]``, ``ent_idx``/``rel_idx [B]`` int64,
    ``tau [B]`` days, ``alpha [B]`` speeds of the batch's relations. With ``sparse_grad`` the
    entity table's gradient is sparse (``rotmem.ops.table_grad``).
    """
    check_ids("unrotated_query_indexed", "ent_idx", ent_idx, entity.shape[0])
    check_ids("unrotated_query_indexed", "rel_idx", rel_idx, w_table.shape[0], "the relation table")
    n = entity.shape[-1] // 2
    theta = angles(alpha, tau, log_s, log_base, tau0, n)
    w_hat = None if w_hat_table is None else w_hat_table[rel_idx]
    h = gather_rows(entity, ent_idx, sparse_grad)
    return unrotated_query(h, w_table[rel_idx], w_hat, theta)


def score_all(q: torch.Tensor, entity: torch.Tensor) -> torch.Tensor:
    """``q [B, 2n] @ entity[N, 2n]^T``: ``[B, N]`` scores against every entity.

    A plain dense product (BLAS, cuBLAS at the device's peak), so every backend uses this one:
    evaluation needs the full score matrix anyway (filtered ranks), there is nothing to fuse.
    """
    if q.shape[-1] != entity.shape[-1]:
        raise ValueError(
            f"q [B, 2n] and entity [N, 2n] must share 2n, got {tuple(q.shape)} and {tuple(entity.shape)}"
        )
    return q @ entity.t()


def inner_products(vectors: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """``[B, N]`` scores ``queries [B, D] · vectors [N, D]ᵀ``: an exact flat search's scan
    (``rotmem.ops.native.inner_products`` computes it for a few queries at a time)."""
    if vectors.dim() != 2 or queries.dim() != 2 or vectors.shape[1] != queries.shape[1]:
        shapes = f"{tuple(vectors.shape)} and {tuple(queries.shape)}"
        raise ValueError(f"vectors [N, D] and queries [B, D], got {shapes}")
    return queries @ vectors.t()


def top_inner_products(
    vectors: torch.Tensor, queries: torch.Tensor, k: int, scores: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(scores [B, k'], rows [B, k'])``, ``k' = min(k, N)``: each query's ``k'`` best rows of
    ``vectors [N, D]``, best first, equal scores in row order (a stable sort's first ``k'``), from
    ``scores [B, N]`` when given (e.g. ``rotmem.ops.native.inner_products``, whose bits
    ``rotmem.ops.native.top_inner_products`` reproduces), else ``inner_products``."""
    scores = inner_products(vectors, queries) if scores is None else scores
    k = min(int(k), vectors.shape[0])
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :k]
    return torch.gather(scores, 1, order), order


def cross_entropy_all(
    q: torch.Tensor, entity: torch.Tensor, target: torch.Tensor, reduction: str = "mean"
) -> torch.Tensor:
    """1-vs-all cross-entropy of ``q [B, 2n]`` against all of ``entity [N, 2n]``, ``target [B]``."""
    check_ids("cross_entropy_all", "target", target, entity.shape[0], ignore=-100)
    return F.cross_entropy(score_all(q, entity).float(), target, reduction=reduction)


def filtered_rank_counts(
    q: torch.Tensor,
    entity: torch.Tensor,
    target: torch.Tensor,
    filter_ptr: torch.Tensor,
    filter_idx: torch.Tensor,
    target_score: torch.Tensor | None = None,
    entity_offset: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per query and filter, how many candidates score above and equal to the query's target.

    ``q [B, D]`` queries, ``entity [N, D]`` the candidates, whose global ids are
    ``entity_offset .. entity_offset + N - 1`` (a shard of a larger table, or all of it), ``target [B]``
    global ids. Scores are ``q @ entity^T`` in the inputs' dtype. ``filter_ptr [F, B+1]`` and
    ``filter_idx [nnz]`` hold ``F`` filters in CSR form: row ``b`` of filter ``f`` is
    ``filter_idx[filter_ptr[f, b] : filter_ptr[f, b + 1]]``, global ids in strictly increasing order
    (ids outside this shard are skipped). The target's score is its own entry of the score matrix, or
    ``target_score [B]`` when given (a shard that does not hold the target).

    Returns ``(higher, ties)``, int64 ``[F, B]``: among this shard's candidates other than the target and
    the row's filtered ids, those scoring ``>`` and ``==`` the target's score. A query whose target
    score, or any of whose ``N`` scores (filtered or not), is NaN or infinite gets -1 in both. Ranks:
    optimistic ``1 + higher``, pessimistic ``1 + higher + ties``, realistic their mean.
    """
    check_filter_csr(filter_ptr, filter_idx, q.shape[0])
    batch, num_entities = q.shape[0], entity.shape[0]
    scores = score_all(q, entity)
    local = target - entity_offset
    inside = (local >= 0) & (local < num_entities)
    if target_score is None:
        check_ids("filtered_rank_counts", "target", target, num_entities, offset=entity_offset)
        target_score = scores.gather(1, local.unsqueeze(1)).squeeze(1)
    rows = torch.arange(batch, device=q.device)
    excluded = torch.zeros(batch, num_entities, dtype=torch.bool, device=q.device)
    excluded[rows[inside], local[inside]] = True
    target_score = target_score.to(scores.dtype if scores.dtype == torch.float64 else torch.float32)
    bad = ~torch.isfinite(scores).all(1) | ~torch.isfinite(target_score)
    higher, ties = [], []
    for f in range(filter_ptr.shape[0]):
        counts = filter_ptr[f, 1:] - filter_ptr[f, :-1]
        ids = filter_idx[filter_ptr[f, 0] : filter_ptr[f, -1]] - entity_offset
        ids_rows = torch.repeat_interleave(rows, counts)
        keep = (ids >= 0) & (ids < num_entities)
        mask = excluded.clone()
        mask[ids_rows[keep], ids[keep]] = True
        candidates = torch.where(mask, float("nan"), scores.to(target_score.dtype))
        higher.append(torch.where(bad, -1, (candidates > target_score[:, None]).sum(1)))
        ties.append(torch.where(bad, -1, (candidates == target_score[:, None]).sum(1)))
    return torch.stack(higher), torch.stack(ties)


def target_scores(
    q: torch.Tensor, entity: torch.Tensor, target: torch.Tensor, entity_offset: int = 0
) -> torch.Tensor:
    """Scores ``[B]`` of each query's target, ``q @ entity^T`` at its column, for the targets among
    ``entity``'s rows (global ids ``entity_offset .. entity_offset + N - 1``); 0 for the others, so a
    sum over the shards of a table gives every score. Float32 (float64 for float64 inputs)."""
    local = target - entity_offset
    inside = (local >= 0) & (local < entity.shape[0])
    scores = (
        score_all(q, entity).gather(1, local.clamp(0, max(entity.shape[0] - 1, 0)).unsqueeze(1)).squeeze(1)
    )
    acc = torch.float64 if scores.dtype == torch.float64 else torch.float32
    return torch.where(inside, scores.to(acc), torch.zeros((), dtype=acc, device=q.device))


def cross_entropy_all_biased(
    q: torch.Tensor,
    entity: torch.Tensor,
    target: torch.Tensor,
    rows: torch.Tensor,
    cols: torch.Tensor,
    bias: torch.Tensor,
    reduction: str = "mean",
) -> torch.Tensor:
    """``cross_entropy_all`` with ``bias [P]`` added to the logits at ``(rows [P], cols [P])``
    (pairs distinct), the rest of ``[B, N]`` unbiased."""
    check_ids("cross_entropy_all_biased", "target", target, entity.shape[0], ignore=-100)
    check_ids("cross_entropy_all_biased", "rows", rows, q.shape[0], "q")
    check_ids("cross_entropy_all_biased", "cols", cols, entity.shape[0])
    logits = score_all(q, entity).float().index_put((rows, cols), bias.float(), accumulate=True)
    return F.cross_entropy(logits, target, reduction=reduction)


def n3(tensors: Sequence[torch.Tensor], kind: str = "l4") -> torch.Tensor:
    """Regulariser summed over ``tensors`` (each ``[..., 2n]``); the caller divides by batch size.

    ``"l4"``: sum of the 4th power of every real coordinate (the RoMem reference code);
    ``"modulus3"``: sum over complex pairs of ``|z|^3`` (tkbc's N3).
    """
    total = None
    for x in tensors:
        if kind == "l4":
            term = (x.float() ** 4).sum()
        elif kind == "modulus3":
            n = x.shape[-1] // 2
            term = ((x[..., :n].float() ** 2 + x[..., n:].float() ** 2) ** 1.5).sum()
        else:
            raise ValueError(f"unknown regulariser kind {kind!r}; expected 'l4' or 'modulus3'")
        total = term if total is None else total + term
    if total is None:
        raise ValueError("n3 needs at least one tensor")
    return total
