"""The model through ``rotmem.ops`` with ``ROTMEM_BACKEND=native`` equals the torch backend; the
native backend's errors name the bad input, and a build without CUDA refuses CUDA tensors."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from rotmem import losses
from rotmem.models.romem import RoMem
from rotmem.ops import backend, native

pytestmark = pytest.mark.skipif(not native.is_available("cpu"), reason=native.unavailable_reason("cpu"))
# The native and torch backends compute the same float32 formulas in other orders (fused kernels,
# tiles): each value differs by a few roundings of the terms it sums. Here values are of order 1,
# sums have at most ~100 terms (dim 36, 40 entities, 25 facts), and the angles reach
# 0.05 rad/day * 4000 days = 200 rad, whose float32 rounding (ulp(200) / 2 = 7.6e-6 rad) moves a sine
# by as much, so one backend may round it differently from the other. Hence 1e-5 on the loss and
# scores, and on gradients, which sum such terms with cancellation, 1e-4 relative with 1e-6 absolute
# for the near-zero entries.


def make_model(backbone: str, speed: str) -> tuple[RoMem, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = RoMem(40, 6, dim=36, k=3, backbone=backbone, speed=speed, tau0=16000.0, init_s=0.05)
    if speed == "learned":
        with torch.no_grad():
            model.speed.logit.normal_()
    g = torch.Generator().manual_seed(1)
    facts = torch.stack(
        [
            torch.randint(0, 40, (25,), generator=g),
            torch.randint(0, 6, (25,), generator=g),
            torch.randint(0, 40, (25,), generator=g),
            torch.randint(16000, 20000, (25,), generator=g),
        ],
        dim=1,
    )
    negative_days = facts[:, 3:].double() + torch.randint(-400, 400, (25, 4), generator=g).double()
    return model, facts, negative_days


def loss_and_grads(model, facts, negative_days, kind):
    model.zero_grad()
    loss = (
        losses.one_vs_all_loss(model, facts)
        + 0.01 * losses.embedding_regularizer(model, facts, kind=kind)
        + 0.5 * losses.time_contrastive_loss(model, facts, negative_days, sigma_years=0.5)
    )
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.usefixtures("cpu_isa")
@pytest.mark.parametrize("backbone", ["chronor", "distmult"])
@pytest.mark.parametrize("speed, kind", [("constant", "l4"), ("learned", "modulus3")])
def test_training_loss_and_gradients_match_torch_backend(monkeypatch, backbone, speed, kind):
    model, facts, negative_days = make_model(backbone, speed)
    monkeypatch.setenv("ROTMEM_BACKEND", "torch")
    ref_loss, ref_grads = loss_and_grads(model, facts, negative_days, kind)
    monkeypatch.setenv("ROTMEM_BACKEND", "native")
    assert backend.backend_name(torch.device("cpu")) == "native"
    loss, grads = loss_and_grads(model, facts, negative_days, kind)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-5)
    assert grads.keys() == ref_grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(
            grad, ref_grads[name], rtol=1e-4, atol=1e-6, msg=lambda m, name=name: f"{name}: {m}"
        )


@pytest.mark.usefixtures("cpu_isa")
def test_scores_match_torch_backend(monkeypatch):
    model, facts, negative_days = make_model("chronor", "learned")
    h, r, t, day = facts.unbind(1)
    results = {}
    for name in ("torch", "native"):
        monkeypatch.setenv("ROTMEM_BACKEND", name)
        with torch.no_grad():
            results[name] = [
                model.score_tails(h, r, day),
                model.score_heads(r, t, day),
                model.score(h, r, t, day),
                model.score(h, r, t, negative_days),
            ]
    for got, want in zip(results["native"], results["torch"], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_cpu_picks_native_automatically(monkeypatch):
    monkeypatch.delenv("ROTMEM_BACKEND", raising=False)
    assert backend.backend_name(torch.device("cpu")) == "native"


# --- errors -------------------------------------------------------------------------------------------


@pytest.mark.skipif(bool(native._C.WITH_CUDA), reason="this build has the CUDA kernels")
def test_build_without_cuda_refuses_cuda_tensors(monkeypatch):
    assert not native.is_available("cuda")
    assert "built without CUDA support" in native.unavailable_reason("cuda")
    monkeypatch.setenv("ROTMEM_BACKEND", "native")
    with pytest.raises(RuntimeError, match="built without CUDA support"):
        backend.backend_module(torch.device("cuda"))
    # The CUDA kernel slot of every op holds an error, not a silent fallback.
    cuda = torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA)
    x, theta = torch.zeros(2, 4), torch.zeros(2, 2)
    with pytest.raises(RuntimeError, match="rotmem was built without CUDA support: rotmem::rotate"):
        torch.ops.rotmem.rotate.default.redispatch(cuda, x, theta)
    with pytest.raises(RuntimeError, match="built without CUDA support: rotmem::n3"):
        torch.ops.rotmem.n3.default.redispatch(cuda, x, "l4")


def test_bad_indices_are_named():
    entity, w = torch.zeros(5, 4), torch.zeros(3, 4)
    args = dict(
        tau=torch.zeros(2), alpha=torch.ones(2), log_s=torch.tensor(0.0), log_base=torch.tensor(2.0), tau0=0.0
    )
    with pytest.raises(IndexError, match=r"ent_idx\[1\] = 5 is out of range for the entity table of 5 rows"):
        native.unrotated_query_indexed(entity, w, None, torch.tensor([0, 5]), torch.tensor([0, 0]), **args)
    with pytest.raises(IndexError, match=r"rel_idx\[0\] = -1 is out of range"):
        native.unrotated_query_indexed(entity, w, None, torch.tensor([0, 1]), torch.tensor([-1, 0]), **args)
    with pytest.raises(ValueError, match="w_hat_table"):
        native.unrotated_query_indexed(
            entity, w, w.double(), torch.tensor([0, 1]), torch.tensor([0, 0]), **args
        )


def test_bad_cross_entropy_inputs_are_named():
    q, e = torch.zeros(3, 4), torch.zeros(6, 4)
    with pytest.raises(IndexError, match=r"target\[2\] = 6 is out of range for the entity table of 6 rows"):
        native.cross_entropy_all(q, e, torch.tensor([0, 1, 6]))
    with pytest.raises(ValueError, match="reduction"):
        native.cross_entropy_all(q, e, torch.tensor([0, 1, 2]), reduction="max")
    with pytest.raises(ValueError, match="dtype"):
        native.cross_entropy_all(q, e.double(), torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="kind"):
        native.n3([q], kind="l3")
    with pytest.raises(ValueError, match=r"\[\.\.\., 2n\]"):
        native.rotate(torch.zeros(2, 3), torch.zeros(2, 1))


BAD_IDS_ON_CUDA = """
import torch
from rotmem.ops import native
entity, w = torch.zeros(5, 4, device="cuda"), torch.zeros(3, 4, device="cuda")
ids = {ids}
z = torch.zeros(2, device="cuda")
if ids == "target":
    native.cross_entropy_all(torch.zeros(2, 4, device="cuda"), entity, torch.tensor([0, 5], device="cuda"))
else:
    ent, rel = ([0, 5], [0, 0]) if ids == "ent_idx" else ([0, 1], [0, 3])
    native.unrotated_query_indexed(
        entity, w, None, torch.tensor(ent, device="cuda"), torch.tensor(rel, device="cuda"),
        z, z + 1, torch.tensor(0.0, device="cuda"), torch.tensor(2.0, device="cuda"), 0.0,
    )
torch.cuda.synchronize()
"""


# What each input's device-side check prints when it fails (csrc/cuda/*.cu).
DEVICE_ASSERTS = {
    "ent_idx": "an ent_idx is out of range for the entity table",
    "rel_idx": "a rel_idx is out of range for the relation table",
    "target": "a target is out of range for the entity table",
}


@pytest.mark.gpu
@pytest.mark.skipif(not native.is_available("cuda"), reason="needs the CUDA build and a GPU")
@pytest.mark.parametrize("ids", sorted(DEVICE_ASSERTS))
def test_bad_ids_on_cuda_fail_on_the_device_naming_the_input(ids):
    """With the host's id check off (``ROTMEM_CHECK_IDS=0``: no readback) the CUDA kernels still
    check the ids they read: a device-side assert that names the input. It leaves the CUDA context
    unusable, so it runs in a subprocess. (With the check on: tests/ops/test_id_ranges.py.)"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "ROTMEM_CHECK_IDS": "0"}
    result = subprocess.run(
        [sys.executable, "-c", BAD_IDS_ON_CUDA.format(ids=repr(ids))],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-2000:]
    assert DEVICE_ASSERTS[ids] in output, output[-2000:]


@pytest.mark.parametrize(
    "error",
    [
        "No module named 'rotmem._C'",  # a pure-Python install (ROTMEM_SKIP_NATIVE=1)
        "/x/rotmem/_C.so: undefined symbol: _ZN3c106detail14torchCheckFailEv",  # built against another torch
    ],
)
@pytest.mark.slow
def test_without_the_extension_the_backend_warns_once_and_says_how_to_rebuild(error):
    """rotmem._C failing to import: one warning with the reason and the rebuild command, native reports
    why, and the CPU falls back to torch; ROTMEM_BACKEND=torch (a deliberate choice) silences it."""
    code = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "rotmem._C":
            raise ImportError({error!r})
sys.meta_path.insert(0, Block())
import torch
from rotmem import ops
from rotmem.ops import backend, native
assert not native.is_available("cpu")
print(native.unavailable_reason("cpu"))
print(backend.backend_name(torch.device("cpu")))
ops.rotate(torch.ones(1, 2), torch.ones(1, 1)); ops.rotate(torch.ones(1, 2), torch.ones(1, 1))
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("ROTMEM_BACKEND", None)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    reason, chosen = run.stdout.strip().splitlines()
    assert f"rotmem._C did not load ({error})" in reason and "--no-build-isolation" in reason
    assert chosen == "torch"
    assert run.stderr.count("RuntimeWarning: rotmem: the native kernels (rotmem._C) did not load") == 1
    assert error in run.stderr and "pip install --no-build-isolation -e ." in run.stderr
    quiet = subprocess.run(
        [sys.executable, "-c", code.replace('print(backend.backend_name(torch.device("cpu")))', "print()")],
        capture_output=True,
        text=True,
        env={**env, "ROTMEM_BACKEND": "torch"},
        check=True,
    )
    assert "RuntimeWarning" not in quiet.stderr


def test_rotmem_backend_names_a_bad_value(monkeypatch):
    monkeypatch.setenv("ROTMEM_BACKEND", "cuda")
    with pytest.raises(
        ValueError, match=r"ROTMEM_BACKEND='cuda' is not one of \('torch', 'native', 'triton', 'compile'\)"
    ):
        backend.backend_name(torch.device("cpu"))
    monkeypatch.setenv("ROTMEM_BACKEND", " Auto ")  # automatic, as when unset
    assert backend.backend_name(torch.device("cpu")) == "native"


@pytest.mark.slow
def test_rotmem_cpu_isa_forces_an_instruction_set():
    """ROTMEM_CPU_ISA picks the kernels' instruction set at import; a bad or unsupported one is named."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    code = "from rotmem.ops import native; print(native.cpu_isa())"
    for name in native.supported_cpu_isas():
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env={**env, "ROTMEM_CPU_ISA": name}
        )
        assert out.stdout.strip() == name, out.stderr
    bad = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**env, "ROTMEM_CPU_ISA": "sse9"}
    )
    assert bad.returncode != 0
    assert "ROTMEM_CPU_ISA='sse9': unknown CPU instruction set 'sse9'" in bad.stderr


def test_cpu_isa_fixture_runs_each_instruction_set(cpu_isa):
    assert native.cpu_isa() == cpu_isa
