"""Triton's fused cross-entropy against the reference, forward and backward; ``opcheck`` of every
Triton op; tables past 2**31 elements (GPU); the training step through the public dispatch.
(``rotate``, the unrotated queries and ``n3`` have one file per op over every backend:
``tests/test_ops_rotate.py``, ``test_ops_unrotated_query.py``, ``test_ops_n3.py``.)

Without a GPU the kernels run under the Triton interpreter (``TRITON_INTERPRET=1``, set here
before the backend is imported) on small, odd shapes and the issue's cheaper ones (B = 999 at
n = 83, N = 10,488 for one row); on a CUDA machine they run compiled on all of the issue's shapes,
and the ``gpu``-marked test adds a table past 2**31 elements.

Accuracy rule: ``tests/accuracy.py`` (flash-attention's, shared with the native backend's tests):
against a float64 truth computed by the reference from the same inputs, a kernel's error is at
most 2x the eager reference's own error in the same dtype, plus the float32 noise floor (how far
the truth itself moves when the inputs move by a few float32 ulps) and a floor for the kernel's
own elementwise arithmetic.
"""

from __future__ import annotations

import importlib
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from accuracy import NOISE, assert_accurate  # noqa: E402  (tests/accuracy.py: the shared bound)

from rotmem.ops import ce_tiles, reference  # noqa: E402
from rotmem.ops.backend import _load, available  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.skipif(
    not available("triton", DEVICE),
    reason=f"Triton cannot run on {DEVICE} here (on the CPU it needs TRITON_INTERPRET=1 before import)",
)
T = _load("triton")
DTYPES = [torch.float32, torch.bfloat16]
GPU = DEVICE == "cuda"
# (rows, entities, 2n): tiny and odd, and the shapes; under the interpreter only those
# whose tests take a few seconds each, the rest on a GPU.
CE_SHAPES = [(1, 1, 2), (13, 70, 18), (16, 37, 66), (1, 10488, 166)] + ([(999, 10488, 498)] if GPU else [])


def make(*shape, dtype=torch.float32, scale=1.0, grad=True):
    t = (torch.randn(*shape, dtype=torch.float64) * scale).to(device=DEVICE, dtype=dtype)
    return t.requires_grad_(grad)


def truth_and_grads(reference_fn, inputs, wrt, grad_out=None, scale=None):
    """The reference in float64 (inputs optionally scaled elementwise): output and ``d/d inputs[wrt]``."""
    args = []
    for i, t in enumerate(inputs):
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            t = t.detach().double()
            if scale is not None and i in scale:
                t = t * scale[i]
            t.requires_grad_(i in wrt)
        args.append(t)
    out = reference_fn(*args)
    grad_out = torch.randn_like(out) if grad_out is None else grad_out
    return out, grad_out, torch.autograd.grad(out, [args[i] for i in wrt], grad_out)


def check_op(kernel_fn, reference_fn, inputs, dtype, names, exact=()):
    """Forward and the gradient of every input that requires grad, against float64 truth.

    ``exact``: indices of inputs that are exact in every precision (days), left unperturbed when
    measuring the noise floor.
    """
    wrt = [i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and t.requires_grad]
    truth, grad_out, exact_grads = truth_and_grads(reference_fn, inputs, wrt)
    noise = [0.0] * (1 + len(wrt))
    floating = [i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and t.is_floating_point()]
    for _ in range(2):
        scale = {i: 1 + NOISE * torch.randn_like(inputs[i], dtype=torch.float64).sign() for i in floating}
        scale = {i: v for i, v in scale.items() if i not in exact}
        moved, _, moved_grads = truth_and_grads(reference_fn, inputs, wrt, grad_out, scale)
        for k, (a, b) in enumerate(zip([truth, *exact_grads], [moved, *moved_grads], strict=True)):
            noise[k] = max(noise[k], (a - b).abs().max().item() if a.numel() else 0.0)
    out, ref = kernel_fn(*inputs), reference_fn(*inputs)
    assert out.dtype == ref.dtype, f"output dtype {out.dtype} != reference {ref.dtype}"
    assert_accurate("forward", out, ref, truth, dtype, noise[0])
    params = [inputs[i] for i in wrt]
    got = torch.autograd.grad(out, params, grad_out.to(out.dtype))
    want = torch.autograd.grad(ref, params, grad_out.to(ref.dtype))
    for k, (i, g, r, x) in enumerate(zip(wrt, got, want, exact_grads, strict=True)):
        assert g.dtype == inputs[i].dtype, f"d/d{names[i]} dtype {g.dtype} != input {inputs[i].dtype}"
        assert_accurate(f"d/d{names[i]}", g, r, x, dtype, noise[k + 1])


# --- cross_entropy_all ---------------------------------------------------------------------------
@pytest.mark.parametrize("grad_in_forward", [True, False])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, entities, width", CE_SHAPES)
def test_cross_entropy_all_matches_reference(
    rows, entities, width, dtype, reduction, grad_in_forward, monkeypatch
):
    """Both ways to the gradients: in the forward sweep, or recomputed in backward."""
    monkeypatch.setattr(ce_tiles, "CE_GRAD_IN_FORWARD", grad_in_forward)
    torch.manual_seed(rows + entities)
    q, entity = make(rows, width, dtype=dtype, scale=0.5), make(entities, width, dtype=dtype, scale=0.5)
    target = torch.randint(0, entities, (rows,), device=DEVICE)

    def kernel(q, entity):
        return T.cross_entropy_all(q, entity, target, reduction)

    def ref(q, entity):
        return reference.cross_entropy_all(q, entity, target, reduction)

    check_op(kernel, ref, [q, entity], dtype, ["q", "entity"])


@pytest.mark.parametrize("grad_in_forward", [True, False])
@pytest.mark.parametrize("tile_elements", [5 * 16, 4 * 69])
def test_cross_entropy_all_many_tiles(tile_elements, grad_in_forward, monkeypatch):
    """Several row blocks, with entity chunks (online log-sum-exp) or whole rows per tile; targets on
    the chunks' edges."""
    monkeypatch.setattr(ce_tiles, "CE_TILE_ELEMENTS", tile_elements)
    monkeypatch.setattr(ce_tiles, "CE_MIN_BLOCK_ROWS", 4)
    monkeypatch.setattr(ce_tiles, "CE_GRAD_IN_FORWARD", grad_in_forward)
    rows, cols = ce_tiles.cross_entropy_blocks(9, 69)
    assert rows < 9 and (cols < 69 if tile_elements == 5 * 16 else cols == 69)
    torch.manual_seed(3)
    q, entity = make(9, 8, scale=2.0), make(69, 8, scale=2.0)
    target = torch.tensor([0, 68, 16, 17, 33, 34, 35, 1, 67], device=DEVICE)
    for reduction in ("none", "mean"):
        check_op(
            lambda q, e, reduction=reduction: T.cross_entropy_all(q, e, target, reduction),
            lambda q, e, reduction=reduction: reference.cross_entropy_all(q, e, target, reduction),
            [q, entity],
            torch.float32,
            ["q", "entity"],
        )


def test_cross_entropy_all_output_gradient_scales_the_forward_gradients(monkeypatch):
    """Gradients computed in the forward sweep are scaled by the output gradient in backward."""
    monkeypatch.setattr(ce_tiles, "CE_GRAD_IN_FORWARD", True)
    q, entity = make(4, 6), make(9, 6)
    target = torch.tensor([1, 8, 0, 3], device=DEVICE)
    got = torch.autograd.grad(-2.5 * T.cross_entropy_all(q, entity, target, "sum"), [q, entity])
    want = torch.autograd.grad(-2.5 * reference.cross_entropy_all(q, entity, target, "sum"), [q, entity])
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("grad_in_forward", [True, False])
@pytest.mark.parametrize("wrt", ["q", "entity"])
def test_cross_entropy_all_one_input_needs_grad(wrt, grad_in_forward, monkeypatch):
    monkeypatch.setattr(ce_tiles, "CE_GRAD_IN_FORWARD", grad_in_forward)
    q, entity = make(3, 6, grad=wrt == "q"), make(9, 6, grad=wrt == "entity")
    target = torch.tensor([1, 8, 0], device=DEVICE)
    x = q if wrt == "q" else entity
    (g,) = torch.autograd.grad(T.cross_entropy_all(q, entity, target), [x])
    (r,) = torch.autograd.grad(reference.cross_entropy_all(q, entity, target), [x])
    torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-6)


def spy_on_one_sweep(monkeypatch) -> list[int]:
    """Count calls of the one-sweep op (``_cross_entropy_train``) made by ``T.cross_entropy_all``."""
    module = importlib.import_module("rotmem.ops.triton.cross_entropy")
    train, calls = module._cross_entropy_train, []
    monkeypatch.setattr(module, "_cross_entropy_train", lambda *args: calls.append(1) or train(*args))
    return calls


@pytest.mark.parametrize("path", ["one_sweep", "tiles"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_all_ignores_minus_100(reduction, path, monkeypatch):
    """Targets of -100 as in F.cross_entropy: loss 0, no gradient, "mean" over the other rows. Either
    whole rows with gradients in the forward sweep ("none" never takes it), or entity chunks with
    gradients recomputed in backward."""
    if path == "tiles":
        monkeypatch.setattr(ce_tiles, "CE_TILE_ELEMENTS", 5 * 16)
        monkeypatch.setattr(ce_tiles, "CE_MIN_BLOCK_ROWS", 4)
    monkeypatch.setattr(ce_tiles, "CE_GRAD_IN_FORWARD", path == "one_sweep")
    calls = spy_on_one_sweep(monkeypatch)
    torch.manual_seed(4)
    q, entity = make(9, 8, scale=2.0), make(69, 8, scale=2.0)
    target = torch.tensor([-100, 68, 16, -100, 33, 34, -100, 1, -100], device=DEVICE)
    check_op(
        lambda q, e: T.cross_entropy_all(q, e, target, reduction),
        lambda q, e: reference.cross_entropy_all(q, e, target, reduction),
        [q, entity],
        torch.float32,
        ["q", "entity"],
    )
    assert len(calls) == (path == "one_sweep" and reduction != "none")


@pytest.mark.parametrize("grad_in_forward", [True, False])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_all_every_target_ignored(reduction, grad_in_forward, monkeypatch):
    """As F.cross_entropy: "mean" is nan (0 / 0 rows), "sum" and "none" are 0; gradients are 0."""
    monkeypatch.setattr(ce_tiles, "CE_GRAD_IN_FORWARD", grad_in_forward)
    q, entity = make(3, 6), make(9, 6)
    target = torch.full((3,), -100, device=DEVICE)
    got = T.cross_entropy_all(q, entity, target, reduction)
    want = reference.cross_entropy_all(q, entity, target, reduction)
    torch.testing.assert_close(got, want, equal_nan=True)
    grads = [torch.autograd.grad(loss.sum(), [q, entity]) for loss in (got, want)]
    for g, w in zip(*grads, strict=True):
        torch.testing.assert_close(g, w)


def test_cross_entropy_all_errors_name_the_input():
    q, entity = make(2, 6, grad=False), make(4, 6, grad=False)
    if DEVICE == "cpu":
        for bad in (4, -101):  # N, and a negative id other than the ignored -100
            with pytest.raises(IndexError, match=f"target has ids outside .*: {bad} at position 1"):
                T.cross_entropy_all(q, entity, torch.tensor([0, bad], device=DEVICE))
    with pytest.raises(ValueError, match="reduction must be one of"):
        T.cross_entropy_all(q, entity, torch.tensor([0, 1], device=DEVICE), reduction="avg")
    with pytest.raises(ValueError, match="must share 2n"):
        T.cross_entropy_all(q, make(4, 8, grad=False), torch.tensor([0, 1], device=DEVICE))


# --- float64 gradcheck and opcheck ---------------------------------------------------------------
def gradcheck_case(op):
    """``(function, float64 inputs)`` for ``torch.autograd.gradcheck`` on tiny shapes."""
    f64 = torch.float64
    if op.startswith("cross_entropy_all"):  # "none": recomputed in backward; "sum": in the forward
        target, reduction = torch.tensor([4, 0, 2], device=DEVICE), op.split(":")[1]
        return lambda q, e: T.cross_entropy_all(q, e, target, reduction), (
            make(3, 4, dtype=f64),
            make(5, 4, dtype=f64),
        )


@pytest.mark.parametrize(
    "op",
    [
        "cross_entropy_all:none",
        "cross_entropy_all:sum",
    ],
)
def test_gradcheck_float64(op):
    torch.manual_seed(0)
    fn, inputs = gradcheck_case(op)
    assert torch.autograd.gradcheck(fn, inputs, fast_mode=True)


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
