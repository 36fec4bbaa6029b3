"""Transition mining for Phase 1: exact pairs on a hand-made graph, filters, and no valid/test leakage."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lightning_modules.phase1_gate import GateTransitionData
from rotmem.data import TemporalKG, synthetic_kg
from rotmem.gate import RelationEncoder, mine_transitions


def quads(rows: list[tuple[int, int, int, int]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.int64)


# (head, relation, tail, day), deliberately out of time order.
HAND_MADE = [
    # slot (0, 0): tails 5@1, 5@3, 6@3, 5@10, 5@20
    #   -> pairs 1->3 same, 3->3 skipped, 3->10 changed, 10->20 same
    (0, 0, 5, 10),
    (0, 0, 5, 1),
    (0, 0, 6, 3),
    (0, 0, 5, 20),
    (0, 0, 5, 3),
    # slot (1, 0): only two observations -> dropped
    (1, 0, 5, 1),
    (1, 0, 6, 2),
    # slot (0, 1): four distinct tails in four observations -> one-to-many (ratio 1 > 0.5)
    (0, 1, 8, 4),
    (0, 1, 5, 1),
    (0, 1, 6, 2),
    (0, 1, 7, 3),
    # slot (2, 1): a 20000-day gap (> 18250) is skipped, the next day's change is kept
    (2, 1, 5, 0),
    (2, 1, 5, 20000),
    (2, 1, 6, 20001),
    # slot (3, 2): a long static run, tails never change
    *[(3, 2, 9, d) for d in range(0, 50, 5)],
]


def as_rows(tr) -> list[tuple[int, float, bool, int]]:
    return sorted(
        zip(
            tr.relation.tolist(),
            tr.delta_days.tolist(),
            tr.changed.tolist(),
            tr.slot_observations.tolist(),
            strict=True,
        )
    )


def test_hand_made_graph_gives_exactly_the_expected_pairs():
    tr = mine_transitions(quads(HAND_MADE), num_relations=3)
    expected = sorted(
        [
            (0, 2.0, False, 5),
            (0, 7.0, True, 5),
            (0, 10.0, False, 5),
            (1, 1.0, True, 3),
            *[(2, 5.0, False, 10)] * 9,
        ]
    )
    assert as_rows(tr) == expected
    summary = tr.summary()
    assert summary["slots"] == 3
    assert summary["pairs"] == 13
    assert summary["slots_one_to_many"] == 1
    assert summary["changed_fraction"] == pytest.approx(2 / 13)
    pairs, rate = tr.per_relation()
    assert pairs.tolist() == [3, 1, 9]
    assert torch.allclose(rate, torch.tensor([1 / 3, 1.0, 0.0]))


def test_functional_ratio_filter_can_be_turned_off():
    tr = mine_transitions(quads(HAND_MADE), num_relations=3, max_functional_ratio=None)
    one_to_many = [row for row in as_rows(tr) if row[0] == 1 and row[3] == 4]
    assert one_to_many == [(1, 1.0, True, 4)] * 3


def test_pairs_per_slot_are_capped_to_the_earliest():
    rows = [(0, 0, t, d) for d, t in enumerate([1, 1, 2, 2, 1])]
    tr = mine_transitions(quads(rows), max_pairs_per_slot=2, max_functional_ratio=None)
    assert tr.changed.tolist() == [False, True]


def test_relation_without_pairs_has_nan_rate():
    tr = mine_transitions(quads(HAND_MADE), num_relations=4)
    pairs, rate = tr.per_relation()
    assert pairs[3] == 0 and torch.isnan(rate[3])


def test_bad_shape_is_named():
    with pytest.raises(ValueError, match=r"\[M, 4\]"):
        mine_transitions(torch.zeros(3, 3, dtype=torch.int64))


def loop_mining(rows, min_obs=3, cap=256, max_delta=18250, ratio=0.5):
    """A plain-Python statement of the filters, to check the vectorised version against."""
    slots: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for h, r, t, d in rows:
        slots.setdefault((h, r), []).append((d, t))
    out = []
    for (_, r), obs in slots.items():
        obs.sort()
        n_unique = len({t for _, t in obs})
        if len(obs) < min_obs or (ratio is not None and n_unique > 2 and n_unique > ratio * len(obs)):
            continue
        kept = [
            (r, float(d1 - d0), t1 != t0, len(obs))
            for (d0, t0), (d1, t1) in zip(obs[:-1], obs[1:], strict=True)
            if 0 < d1 - d0 <= max_delta
        ]
        out += kept[:cap]
    return sorted(out)


facts = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 4), st.integers(0, 30)), max_size=60
)


@settings(max_examples=60, deadline=None)
@given(rows=facts, cap=st.integers(1, 5), ratio=st.sampled_from([0.5, None]), max_delta=st.integers(1, 40))
def test_vectorised_mining_matches_a_plain_loop(rows, cap, ratio, max_delta):
    tensor = quads(rows) if rows else torch.zeros(0, 4, dtype=torch.int64)
    tr = mine_transitions(
        tensor, 3, max_pairs_per_slot=cap, max_delta_days=max_delta, max_functional_ratio=ratio
    )
    assert as_rows(tr) == loop_mining(rows, cap=cap, max_delta=max_delta, ratio=ratio)


class ConstantEncoder(RelationEncoder):
    """Embeds every text as a constant vector: mining tests need no transformer."""

    def __init__(self):
        super().__init__(cache_dir=False)

    def encode(self, texts):
        return torch.ones(len(texts), 8)


def test_mining_never_reads_valid_or_test():
    kg = synthetic_kg(num_people=40, seed=3).kg
    reference = GateTransitionData(kg=kg, relation_encoder=ConstantEncoder())

    generator = torch.Generator().manual_seed(0)

    def poison(split: torch.Tensor) -> torch.Tensor:
        noise = torch.randint(0, 5, split.shape, generator=generator)
        noise[:, 0] = noise[:, 0] % kg.num_entities
        noise[:, 1] = noise[:, 1] % kg.num_relations
        noise[:, 3] = split[:, 3] + 1
        return torch.cat([split, noise, kg.train])  # even a copy of train in valid/test changes nothing

    poisoned = dataclasses.replace(kg, valid=poison(kg.valid), test=poison(kg.test))
    data = GateTransitionData(kg=poisoned, relation_encoder=ConstantEncoder())
    for name in ("relation", "delta_days", "changed", "slot_observations"):
        assert torch.equal(getattr(data.transitions, name), getattr(reference.transitions, name))

    # ... while the same change to train does change the mined pairs (the check is not vacuous).
    moved = dataclasses.replace(kg, train=poison(kg.train))
    assert len(GateTransitionData(kg=moved, relation_encoder=ConstantEncoder()).transitions) != len(
        reference.transitions
    )


def test_zero_shot_subset_keeps_only_its_relations():
    kg = synthetic_kg(num_people=40, seed=3).kg
    data = GateTransitionData(
        kg=kg, train_relations=["born in", "lives in"], relation_encoder=ConstantEncoder()
    )
    kept = {kg.relations[i] for i in torch.unique(data.transitions.relation).tolist()}
    assert kept == {"born in", "lives in"}
    assert len(data.all_transitions) > len(data.transitions)


def test_temporal_kg_without_transitions_is_a_clear_error():
    kg = TemporalKG(
        "tiny", ["a", "b"], ["r"], quads([(0, 0, 1, 1)]), quads([]).reshape(0, 4), quads([]).reshape(0, 4)
    )
    with pytest.raises(ValueError, match="no transitions mined from the training split of 'tiny'"):
        GateTransitionData(kg=kg, relation_encoder=ConstantEncoder())
