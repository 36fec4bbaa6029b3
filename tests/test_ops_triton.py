"""The Triton ops as torch sees them: ``opcheck`` of every op and its backward (schema, fakes,
autograd registration, AOT tracing); tables past 2**31 elements (GPU); a training step through the
public dispatch equal to the eager reference's. Each op's values, on every backend, are tested in
its own file (``tests/test_ops_rotate.py``, ``test_ops_unrotated_query.py``, ``test_ops_n3.py``,
``test_ops_cross_entropy.py``, ``test_ops_score_all.py``, ``test_ops_rank_counts.py``).

Without a GPU the kernels run under the Triton interpreter (``TRITON_INTERPRET=1``, set here
before the backend is imported) on tiny shapes.
"""

from __future__ import annotations

import importlib
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from rotmem.ops import reference  # noqa: E402
from rotmem.ops.backend import _load, available  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.skipif(
    not available("triton", DEVICE),
    reason=f"Triton cannot run on {DEVICE} here (on the CPU it needs TRITON_INTERPRET=1 before import)",
)
T = _load("triton")
GPU = DEVICE == "cuda"


def make(*shape, dtype=torch.float32, scale=1.0, grad=True):
    t = (torch.randn(*shape, dtype=torch.float64) * scale).to(device=DEVICE, dtype=dtype)
    return t.requires_grad_(grad)


def opcheck_case(name):
    """``(op, args)`` for ``torch.library.opcheck``: a differentiable op gets float inputs that
    require grad (so its autograd registration and backward are checked); a ``*_backward`` op gets
    plain tensors."""
    ops = {
        module: importlib.import_module(f"rotmem.ops.triton.{module}")
        for module in ("rotate", "unrotated_query", "unrotated_query_indexed", "cross_entropy", "n3")
    }
    torch.manual_seed(0)
    x, theta, h, w, w_hat = make(3, 10), make(3, 5), make(3, 10), make(3, 10), make(3, 10)
    entity, w_table, w_hat_table = make(4, 10), make(2, 10), make(2, 10)
    ids = torch.tensor([1, 0, 1], device=DEVICE)
    speed, log_base = make(3), torch.tensor(2.0, device=DEVICE, requires_grad=True)
    q, target = make(2, 10), torch.tensor([3, -100], device=DEVICE)  # -100: an ignored row
    lse = torch.randn(2, device=DEVICE)
    grad = make(3, 10, grad=False)
    query, query_indexed = ops["unrotated_query"], ops["unrotated_query_indexed"]
    indexed = (entity, w_table, w_hat_table, ids, ids, speed, log_base)
    ce = ops["cross_entropy"]
    cases = {
        "rotate": (ops["rotate"]._rotate, (x, theta)),
        "rotate_backward": (ops["rotate"]._rotate_backward, (grad, x, theta)),
        "unrotated_query": (query._query, (h, w, None, theta)),
        "unrotated_query:w_hat": (query._query, (h, w, w_hat, theta)),
        "unrotated_query_backward": (query._query_backward, (grad, h, w, None, theta)),
        "unrotated_query_backward:w_hat": (query._query_backward, (grad, h, w, w_hat, theta)),
        "unrotated_query_indexed": (query_indexed._query_indexed, (*indexed, torch.float32, False)),
        "unrotated_query_indexed:sparse_grad": (
            query_indexed._query_indexed,
            (*indexed, torch.float32, True),
        ),
        "unrotated_query_indexed_backward": (query_indexed._query_indexed_backward, (grad, *indexed)),
        "cross_entropy_all": (ce._cross_entropy, (q, entity, target, 1, 2)),
        "cross_entropy_all_backward": (
            ce._cross_entropy_backward,
            (torch.randn(2, device=DEVICE), q, entity, target, lse, 1, 2, True, True),
        ),
        "cross_entropy_all_train": (ce._cross_entropy_train, (q, entity, target, "mean", 1, True, True)),
        "n3": (ops["n3"]._n3, (x, True)),
        "n3_backward": (ops["n3"]._n3_backward, (torch.randn(1, device=DEVICE), x, True)),
    }
    op, args = cases[name]
    if is_backward(name):
        args = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
    return op, args


def is_backward(name: str) -> bool:
    return name.split(":")[0].endswith("_backward")


OPCHECK_CASES = [
    "rotate",
    "rotate_backward",
    "unrotated_query",
    "unrotated_query:w_hat",
    "unrotated_query_backward",
    "unrotated_query_backward:w_hat",
    "unrotated_query_indexed",
    "unrotated_query_indexed:sparse_grad",
    "unrotated_query_indexed_backward",
    "cross_entropy_all",
    "cross_entropy_all_backward",
    "cross_entropy_all_train",
    "n3",
    "n3_backward",
]


@pytest.mark.parametrize("name", OPCHECK_CASES)
def test_opcheck(name):
    """Schema, fake (meta) implementation, autograd registration and AOT tracing (forward and, for
    inputs requiring grad, backward) of every op."""
    op, args = opcheck_case(name)
    needs_grad = any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
    assert needs_grad != is_backward(name), "inputs must require grad exactly for differentiable ops"
    # A traced backward gives the dense gradient by design (compiled graphs take no sparse
    # tensors): eager (sparse) and AOT (dense) layouts differ, test_sparse_grad.py checks values.
    sparse = name.endswith(":sparse_grad")
    utils = [u for u in torch.library._OPCHECK_DEFAULT_UTILS if not (sparse and "aot" in u)]
    result = torch.library.opcheck(op, args, test_utils=utils)
    failed = {test: verdict for test, verdict in result.items() if verdict != "SUCCESS"}
    assert not failed, failed


# --- GPU only: offsets beyond 2**31 elements -----------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="needs a CUDA device with ~30 GB free")
def test_tables_beyond_int32_offsets():
    n, entities = 249, (1 << 31) // 498 + 64  # the last rows start past element 2**31
    entity = torch.empty(entities, 2 * n, device=DEVICE).uniform_(-0.4, 0.4)
    w = torch.empty(3, 2 * n, device=DEVICE).uniform_(-0.4, 0.4)
    ent_idx = torch.tensor([entities - 1, entities - 40, 0], device=DEVICE)
    rel_idx = torch.tensor([0, 2, 1], device=DEVICE)
    args = (ent_idx, rel_idx, torch.full((3,), 13000.0, device=DEVICE), torch.ones(3, device=DEVICE))
    spectrum = (torch.tensor(-3.0, device=DEVICE), torch.tensor(9.2, device=DEVICE), 12784.0)
    q = T.unrotated_query_indexed(entity, w, None, *args, *spectrum)
    torch.testing.assert_close(q, reference.unrotated_query_indexed(entity, w, None, *args, *spectrum))
    target = torch.tensor([entities - 1, entities - 2, 5], device=DEVICE)
    with torch.no_grad():
        loss = T.cross_entropy_all(q, entity, target, "none")
        want = torch.cat(
            [reference.cross_entropy_all(q[i : i + 1], entity, target[i : i + 1], "none") for i in range(3)]
        )
    torch.testing.assert_close(loss, want, rtol=1e-4, atol=1e-4)


# --- the model's training step through the public dispatch ---------------------------------------
@pytest.mark.parametrize("backbone", ["chronor", "distmult"])
def test_training_step_matches_reference(backbone, monkeypatch):
    """Loss and every parameter's gradient of a Phase-2 step: ``ROTMEM_BACKEND=triton`` vs ``torch``."""
    from rotmem import ops
    from rotmem.models.romem import RoMem

    torch.manual_seed(0)
    model = RoMem(23, 4, dim=18, k=3, backbone=backbone, speed="learned", tau0=12784.0, init_s=0.05).to(
        DEVICE
    )
    g = torch.Generator().manual_seed(2)
    h, t = torch.randint(0, 23, (2, 9), generator=g).to(DEVICE)
    r = torch.randint(0, 4, (9,), generator=g).to(DEVICE)
    tau = (12784 + torch.randint(0, 4017, (9,), generator=g)).to(DEVICE, torch.float32)
    params = [p for p in model.parameters() if p.requires_grad]

    def step():
        queries = torch.cat([model.query_tails(h, r, tau), model.query_heads(r, t, tau)])
        rows = [model.entity[h], model.w[r], model.entity[t]] + (
            [] if model.w_hat is None else [model.w_hat[r]]
        )
        loss = ops.cross_entropy_all(queries, model.entity, torch.cat([t, h])) + 0.01 * ops.n3(rows) / 9
        return loss, torch.autograd.grad(loss, params)

    monkeypatch.setenv("ROTMEM_BACKEND", "triton")
    loss, grads = step()
    monkeypatch.setenv("ROTMEM_BACKEND", "torch")
    want_loss, want_grads = step()
    torch.testing.assert_close(loss, want_loss, rtol=1e-5, atol=1e-6)
    for p, got, want in zip(params, grads, want_grads, strict=True):
        torch.testing.assert_close(
            got, want, rtol=1e-4, atol=1e-6, msg=lambda m, p=p: f"{tuple(p.shape)}: {m}"
        )
