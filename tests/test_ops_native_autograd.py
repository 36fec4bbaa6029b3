"""Native ops under torch.library's and torch.compile's checks: ``torch.library.opcheck`` (schema,
fake tensors, autograd registration, AOT dispatch) and a ``torch.compile``d training step equal to
the eager one. (Each op's float64 gradcheck is in its own file, ``tests/test_ops_<op>.py``.)"""

from __future__ import annotations

import pytest
import torch

from rotmem.ops import native, reference

pytestmark = pytest.mark.skipif(not native.is_available("cpu"), reason=native.unavailable_reason("cpu"))


def leaf(*shape, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).requires_grad_()


def indexed_args(chronor=True, log_s=-1.0, log_base=2.0, batch=6, n=3, entities=5, relations=3):
    g = torch.Generator().manual_seed(7)
    return (
        leaf(entities, 2 * n, seed=1),
        leaf(relations, 2 * n, seed=2),
        leaf(relations, 2 * n, seed=3) if chronor else None,
        torch.randint(0, entities, (batch,), generator=g),
        torch.randint(0, relations, (batch,), generator=g),
        (torch.rand(batch, generator=g, dtype=torch.float64) * 20).requires_grad_(),
        torch.rand(batch, generator=g, dtype=torch.float64).requires_grad_(),
        torch.tensor(log_s, dtype=torch.float64, requires_grad=True),
        torch.tensor(log_base, dtype=torch.float64, requires_grad=True),
        3.0,
    )


# --- torch.library.opcheck -----------------------------------------------------------------------------


def opcheck(op, args, kwargs=None, test_utils=torch.library._OPCHECK_DEFAULT_UTILS):
    result = torch.library.opcheck(op, args, kwargs, test_utils=test_utils)
    failed = {name: verdict for name, verdict in result.items() if verdict != "SUCCESS"}
    assert not failed, failed


def f32(*shape, seed=0, grad=True):
    return leaf(*shape, seed=seed).detach().float().requires_grad_(grad)


def test_opcheck_rotation_ops():
    ops = torch.ops.rotmem
    x, theta = f32(5, 8), f32(5, 4, seed=1)
    opcheck(ops.rotate.default, (x, theta))
    opcheck(ops.rotate_backward.default, (f32(5, 8, seed=2, grad=False), x.detach(), theta.detach()))
    h, w, v = f32(5, 8), f32(5, 8, seed=1), f32(5, 8, seed=2)
    for w_hat in (v, None):
        opcheck(ops.unrotated_query.default, (h, w, w_hat, theta))
        plain_w_hat = None if w_hat is None else w_hat.detach()
        opcheck(
            ops.unrotated_query_backward.default,
            (x.detach(), h.detach(), w.detach(), plain_w_hat, theta.detach()),
        )


@pytest.mark.parametrize("sparse_grad", [False, True])
@pytest.mark.parametrize("chronor", [True, False])
def test_opcheck_indexed(chronor, sparse_grad):
    args = tuple(
        a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
        for a in indexed_args(chronor)
    )
    args = tuple(
        a.detach().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
        for a in args
    )
    # A traced backward gives the dense gradient by design (compiled graphs take no sparse
    # tensors), so eager (sparse) and AOT (dense) layouts differ there; test_sparse_grad.py checks
    # that their values agree.
    utils = [u for u in torch.library._OPCHECK_DEFAULT_UTILS if not (sparse_grad and "aot" in u)]
    opcheck(torch.ops.rotmem.unrotated_query_indexed.default, (*args, sparse_grad), test_utils=utils)
    plain = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
    opcheck(torch.ops.rotmem.unrotated_query_indexed_backward.default, (f32(6, 6, grad=False), *plain))


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_opcheck_cross_entropy(reduction):
    ops = torch.ops.rotmem
    q, e, target = f32(7, 6), f32(9, 6, seed=1), torch.tensor([0, 8, 3, 3, -100, 1, 2])
    opcheck(ops.cross_entropy_all.default, (q, e, target, reduction, 3, 4))
    lse = ops.cross_entropy_all.default(q.detach(), e.detach(), target, reduction, 3, 4)[1]
    grad = torch.ones(7) if reduction == "none" else torch.tensor(1.0)
    opcheck(
        ops.cross_entropy_all_backward.default,
        (grad, q.detach(), e.detach(), target, lse, reduction, 3, 4, True, True),
    )
    if reduction != "none":
        for need_q, need_e in ((True, True), (True, False), (False, True)):
            args = (q if need_q else q.detach(), e if need_e else e.detach(), target, reduction, 3, 4)
            opcheck(ops.cross_entropy_all_train.default, (*args, need_q, need_e))


def test_opcheck_n3():
    for kind in ("l4", "modulus3"):
        opcheck(torch.ops.rotmem.n3.default, (f32(4, 8), kind))
        opcheck(torch.ops.rotmem.n3_backward.default, (torch.tensor(2.0), f32(4, 8, grad=False), kind))


# --- torch.compile -------------------------------------------------------------------------------------


@pytest.mark.usefixtures("cpu_isa")
def test_compiled_step_equals_eager():
    """A training step (queries, fused CE, N3) compiled with fullgraph=True matches eager native.

    Compiled and eager run the same kernels; only the glue around them (scaling, sums of the loss
    terms) may round in another order: a few float32 ulp of values of order 1, so 1e-5. Against the
    reference: the native-vs-torch differences of test_ops_native_model (angles up to 20 rad here), 1e-4.
    """
    torch._dynamo.reset()
    args = indexed_args(batch=12, n=5, entities=20, relations=4)
    tables = [a.detach().float().requires_grad_() for a in args[:3]]
    ent_idx, rel_idx = args[3], args[4]
    tail = torch.randint(0, 20, (12,), generator=torch.Generator().manual_seed(3))
    rest = [a.detach().float().requires_grad_() for a in args[5:9]]

    def step(entity, w, w_hat, tau, alpha, log_s, log_base):
        q = native.unrotated_query_indexed(
            entity, w, w_hat, ent_idx, rel_idx, tau, alpha, log_s, log_base, 3.0
        )
        loss = native.cross_entropy_all(q, entity, tail) + 0.01 * native.n3([entity[ent_idx], w[rel_idx]])
        return loss

    def grads(fn):
        inputs = [t.detach().clone().requires_grad_() for t in (*tables, *rest)]
        loss = fn(*inputs)
        return [loss, *torch.autograd.grad(loss, inputs)]

    eager = grads(step)
    compiled = grads(torch.compile(step, fullgraph=True, backend="aot_eager"))
    for a, b in zip(eager, compiled, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # and the same step with the reference agrees too
    ref = grads(
        lambda *t: (
            reference.cross_entropy_all(
                reference.unrotated_query_indexed(t[0], t[1], t[2], ent_idx, rel_idx, *t[3:], 3.0), t[0], tail
            )
            + 0.01 * reference.n3([t[0][ent_idx], t[1][rel_idx]])
        )
    )
    for a, b in zip(eager, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_cross_entropy_gradients_survive_retain_graph_and_accumulation():
    """The fused CE hands its saved gradients to autograd (unit output gradient): repeated backward
    passes must neither see them modified nor modify them."""
    q, e = f32(6, 4), f32(9, 4, seed=1)
    target = torch.tensor([0, 8, 3, 3, 1, 2])
    loss = native.cross_entropy_all(q, e, target)
    first = torch.autograd.grad(loss, [q, e], retain_graph=True)
    loss.backward(retain_graph=True)
    loss.backward(retain_graph=True)
    for leaf_, grad in zip((q, e), first, strict=True):
        torch.testing.assert_close(leaf_.grad, 2 * grad)
    torch.testing.assert_close(torch.autograd.grad(loss, [q, e])[0], first[0])
