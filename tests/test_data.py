"""Parsing, vocabulary, day arithmetic, dataset resolution, the synthetic graph."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rotmem.data import DataFormatError, date_of, day_of, load_dataset, load_directory, synthetic_kg
from rotmem.data.registry import KNOWN_DATASETS, candidate_dirs, fetch, sha256_of


def write_splits(
    folder: Path, train: str, valid: str = "a\tr\tb\t2020-01-02\n", test: str = "b\tr\tc\t2020-01-03\n"
):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.txt").write_text(train, encoding="utf-8")
    (folder / "valid.txt").write_text(valid, encoding="utf-8")
    (folder / "test.txt").write_text(test, encoding="utf-8")
    return folder


def test_day_of_and_date_of_round_trip():
    assert day_of("1970-01-01") == 0
    assert day_of("2005-01-01") == 12784
    assert date_of(12784) == "2005-01-01"
    assert date_of(day_of("2015-12-31") + 0.7) == "2015-12-31"


def test_vocabulary_spans_all_splits(tmp_path):
    kg = load_directory(
        write_splits(tmp_path, "a\tr\tb\t2020-01-01\na\ts\tc\t2020-01-05\n", test="d\tr\ta\t2020-01-03\n")
    )
    assert kg.entities == ["a", "b", "c", "d"]
    assert kg.relations == ["r", "s"]
    assert kg.train.dtype == torch.int64 and kg.train.shape == (2, 4)
    assert kg.train[1].tolist() == [0, 1, 2, day_of("2020-01-05")]
    assert kg.test[0].tolist() == [3, 0, 0, day_of("2020-01-03")]
    assert kg.first_day == day_of("2020-01-01")
    assert kg.entity_id("c") == 2


@pytest.mark.parametrize(
    "train, message",
    [
        ("a\tr\tb\t2020-01-01\na\tr\tb\n", "train.txt:2: expected 4 tab-separated fields"),
        ("a\tr\tb\t2020-01-01\n\na\tr\tb\t2020-13-01\n", "train.txt:3: bad date '2020-13-01'"),
        ("a\tr\tb\t2020-01-01\tx\n", "train.txt:1: expected 4"),
        ("", "train.txt: file is empty"),
    ],
)
def test_parser_errors_name_file_and_line(tmp_path, train, message):
    write_splits(tmp_path, train)
    with pytest.raises(DataFormatError, match=message.replace("(", r"\(")):
        load_directory(tmp_path)


def test_missing_split_is_named(tmp_path):
    (tmp_path / "train.txt").write_text("a\tr\tb\t2020-01-01\n")
    with pytest.raises(FileNotFoundError, match="valid.txt, test.txt"):
        load_directory(tmp_path)


def test_unknown_strings_are_named(tmp_path):
    kg = load_directory(write_splits(tmp_path, "a\tr\tb\t2020-01-01\n"))
    with pytest.raises(KeyError, match="unknown entity 'zz'"):
        kg.entity_id("zz")
    with pytest.raises(KeyError, match="unknown relation 'lives on Mars'"):
        kg.relation_id("lives on Mars")


def test_resolution_order(tmp_path, monkeypatch):
    explicit = write_splits(tmp_path / "explicit" / "toy", "x\tr\ty\t2020-01-01\n")
    env = write_splits(tmp_path / "env" / "toy", "e\tr\tf\t2020-01-01\n")
    monkeypatch.setenv("ROTMEM_DATA_DIR", str(tmp_path / "env"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert load_dataset("toy", data_dir=explicit.parent).entities[0] == "x"
    assert load_dataset("toy").entities[0] == "e"
    assert candidate_dirs("toy")[-1] == tmp_path / "cache" / "rotmem" / "toy"
    with pytest.raises(FileNotFoundError, match="dataset 'nothing' not found"):
        load_dataset("nothing")
    assert env.is_dir()


def test_fetch_offline_fails_with_what_to_do(tmp_path, monkeypatch):
    def offline(*args, **kwargs):
        raise OSError("network is unreachable")

    monkeypatch.setattr("urllib.request.urlopen", offline)
    with pytest.raises(RuntimeError, match="offline, copy train.txt, valid.txt and test.txt"):
        fetch("icews05-15", tmp_path)
    assert not list(tmp_path.glob("*.part"))


def test_fetch_rejects_a_bad_checksum(tmp_path, monkeypatch):
    class Response:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self):
            return b"not the data\n"

    monkeypatch.setattr("urllib.request.urlopen", lambda url, timeout: Response())
    with pytest.raises(RuntimeError, match="does not match the expected"):
        fetch("icews05-15", tmp_path)
    assert not (tmp_path / "train.txt").exists()


def test_icews05_15_counts(icews):
    assert icews.num_entities == 10488
    assert icews.num_relations == 251
    assert icews.num_days == 4017
    assert (len(icews.train), len(icews.valid), len(icews.test)) == (368962, 46275, 46092)
    assert icews.date_of(icews.first_day) == "2005-01-01"


def test_icews05_15_checksums(icews):
    from tests.conftest import icews_dir

    for split, (_, expected) in KNOWN_DATASETS["icews05-15"].items():
        assert sha256_of(icews_dir() / f"{split}.txt") == expected


def test_synthetic_graph_is_seeded_and_knows_the_truth():
    a, b = synthetic_kg(seed=3, num_people=30), synthetic_kg(seed=3, num_people=30)
    assert torch.equal(a.kg.train, b.kg.train)
    kg = a.kg
    for h, r, t, day in kg.all_facts[:200].tolist():
        relation = kg.relations[r]
        if relation == "president of":
            assert a.subject_of(relation, kg.entities[t], day) == kg.entities[h]
        else:
            assert a.holder(kg.entities[h], relation, day) == kg.entities[t]
    person = "person_000"
    assert a.holder(person, "born in", a.first_day) == a.holder(person, "born in", a.last_day)
    homes = {a.holder(person, "lives in", d) for d in range(a.first_day, a.last_day, 30)}
    assert len(homes) >= 2


def test_split_by_time_orders_the_splits_and_drops_what_train_never_saw():
    from rotmem.data import TemporalKG, day_of, split_by_time

    d = day_of
    train = torch.tensor([[0, 0, 1, d("2014-01-02")], [1, 0, 2, d("2013-05-01")], [3, 1, 4, d("2015-03-01")]])
    valid = torch.tensor([[0, 0, 2, d("2014-06-01")], [0, 1, 4, d("2014-07-01")]])  # e4 only after 2014
    test = torch.tensor([[2, 0, 0, d("2015-02-01")], [1, 0, 0, d("2014-12-31")]])
    kg = TemporalKG("toy", [f"e{i}" for i in range(5)], ["r0", "r1"], train, valid, test)
    split, counts = split_by_time(kg, "2014-03-01", "2015-01-01")
    assert split.train[:, 3].max() < d("2014-03-01") <= split.valid[:, 3].min()
    assert split.valid[:, 3].max() < d("2015-01-01") <= split.test[:, 3].min()
    # r1 and e3, e4 are never seen before 2014-03-01: their facts are dropped from valid and test
    assert counts == {"train": 2, "valid": 2, "valid_dropped": 1, "test": 1, "test_dropped": 1}
    assert split.entities == kg.entities and split.name == "toy@2014-03-01,2015-01-01"
    with pytest.raises(ValueError, match="must come after"):
        split_by_time(kg, "2015-01-01", "2014-01-01")


def test_hold_out_weeks_keeps_every_held_out_day_out_of_train_and_tests_on_it():
    from rotmem.data import TemporalKG, hold_out_weeks

    g = torch.Generator().manual_seed(0)
    first, days = 1000, 7 * 30  # 30 weeks

    def facts(n):
        h, t = torch.randint(0, 6, (n,), generator=g), torch.randint(0, 6, (n,), generator=g)
        return torch.stack(
            [h, torch.randint(0, 2, (n,), generator=g), t, first + torch.randint(0, days, (n,), generator=g)],
            1,
        )

    train = torch.cat(
        [facts(600), torch.tensor([[0, 0, 1, first], [6, 0, 1, first + 7 * 3]])]
    )  # e6: held-out day only
    valid, test = facts(100), facts(100)
    kg = TemporalKG("toy", [f"e{i}" for i in range(7)], ["r0", "r1"], train, valid, test)
    split, counts = hold_out_weeks(kg, every=7)
    week = lambda f: (f[:, 3] - first) // 7  # noqa: E731
    held = lambda f: week(f) % 7 == 3  # noqa: E731
    assert not held(split.train).any() and held(split.valid).all() and held(split.test).all()
    assert torch.equal(split.train, train[~held(train)])
    assert split.test.shape[0] + counts["test_dropped"] == int(held(train).sum() + held(test).sum())
    assert counts["test_dropped"] == 1  # the fact of e6, never seen in the new train split
    assert counts == {
        "train": split.train.shape[0],
        "train_held_out": int(held(train).sum()),
        "valid": int(held(valid).sum()),
        "valid_dropped": 0,
        "test": split.test.shape[0],
        "test_dropped": 1,
        "other_days_dropped": int((~held(valid)).sum() + (~held(test)).sum()),
    }
    assert split.first_day == kg.first_day and int(split.train[:, 3].max()) == int(train[:, 3].max())
    assert split.name == "toy@hold-out-weeks-7" and split.entities == kg.entities
    with pytest.raises(ValueError, match="at least 2"):
        hold_out_weeks(kg, every=1)
    with pytest.raises(ValueError, match="too few"):
        hold_out_weeks(kg, every=40)
