"""Large synthetic graphs (``rotmem data synthetic``) and the memory-mapped array format."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rotmem.cli import main
from rotmem.data import arrays, load_dataset
from rotmem.data.large_synthetic import SyntheticGraph, split_sizes, write_synthetic_graph


def test_graph_is_a_function_of_seed_and_index():
    graph = SyntheticGraph(5000, 12, seed=7)
    whole = graph.facts(0, 3000)
    assert whole.dtype == np.int64 and whole.shape == (3000, 4)
    assert np.array_equal(np.concatenate([graph.facts(0, 1234), graph.facts(1234, 3000)]), whole)
    assert np.array_equal(SyntheticGraph(5000, 12, seed=7).facts(0, 3000), whole)
    assert not np.array_equal(SyntheticGraph(5000, 12, seed=8).facts(0, 3000), whole)
    h, r, t, day = whole.T
    assert h.min() >= 0 and h.max() < 5000 and t.min() >= 0 and t.max() < 5000 and r.max() < 12
    assert day.min() >= graph.first_day and day.max() <= graph.last_day


def test_static_tails_follow_head_and_relation():
    """Static relations: one tail per (head, relation) but for the 10% noise."""
    facts = SyntheticGraph(50, 4, seed=1).facts(0, 20000)
    static = facts[facts[:, 1] == 0]
    for head in np.unique(static[:, 0])[:5]:
        tails = static[static[:, 0] == head, 2]
        most = np.bincount(tails).max()
        assert most >= 0.7 * len(tails), f"head {head}: tails {np.bincount(tails)}"


def test_written_graph_loads_memory_mapped_and_equals_the_generator(tmp_path):
    out = write_synthetic_graph(tmp_path / "g", num_entities=3000, num_facts=10001, seed=3, chunk_facts=999)
    kg = load_dataset(out)
    sizes = split_sizes(10001)
    assert [len(kg.train), len(kg.valid), len(kg.test)] == [sizes["train"], sizes["valid"], sizes["test"]]
    assert kg.num_entities == 3000 and kg.entities[17] == "e17" and kg.num_relations == 20
    expected = torch.from_numpy(SyntheticGraph(3000, 20, seed=3).facts(0, 10001))
    assert torch.equal(torch.cat([kg.train, kg.valid, kg.test]), expected)
    assert isinstance(np.load(out / "train.npy", mmap_mode="r"), np.memmap)
    assert kg.entity_id("e2999") == 2999
    again = write_synthetic_graph(tmp_path / "h", num_entities=3000, num_facts=10001, seed=3)  # other chunks
    for name in ("train.npy", "valid.npy", "test.npy", "entities.txt", "relations.txt"):
        assert (out / name).read_bytes() == (again / name).read_bytes(), name


def test_incomplete_folder_is_not_a_dataset(tmp_path):
    writer = arrays.ArrayWriter(tmp_path, "half", {"train": 2, "valid": 1, "test": 1})
    writer.write("train", np.zeros((2, 4), dtype=np.int64))
    with pytest.raises(ValueError, match="splits not filled"):
        writer.close()
    assert not arrays.is_array_dir(tmp_path)
    with pytest.raises(ValueError, match="2 announced"):
        writer.write("train", np.zeros((1, 4), dtype=np.int64))


def write_text_dataset(directory, rows=200):
    directory.mkdir()
    for split in ("train", "valid", "test"):
        lines = [f"a{i % 7}\tr{i % 3}\tb{i % 11}\t2020-01-{1 + i % 28:02d}\n" for i in range(rows)]
        (directory / f"{split}.txt").write_text("".join(lines))
    return directory


def test_text_dataset_is_cached_as_arrays(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(arrays, "CACHE_MIN_BYTES", 0)
    data = write_text_dataset(tmp_path / "toy")
    first = load_dataset(data)
    cached = list((tmp_path / "cache" / "rotmem" / "arrays").iterdir())
    assert len(cached) == 1 and arrays.is_array_dir(cached[0])

    def no_parsing(*args, **kwargs):
        raise AssertionError("the second load parsed the text files")

    monkeypatch.setattr(arrays, "load_directory", no_parsing)
    second = load_dataset(data)
    assert second.entities == first.entities and second.relations == first.relations
    for split in ("train", "valid", "test"):
        assert torch.equal(second.split(split), first.split(split))
    (data / "test.txt").write_text("x\ty\tz\t2021-01-01\n")  # a changed file is parsed again
    with pytest.raises(AssertionError, match="parsed"):
        load_dataset(data)


def test_cli_writes_a_loadable_graph(tmp_path, capsys):
    assert (
        main(["data", "synthetic", "--entities", "100", "--facts", "1000", "--out", str(tmp_path / "g")]) == 0
    )
    assert "wrote" in capsys.readouterr().out
    assert main(["data", "info", str(tmp_path / "g")]) == 0
    assert "entities 100" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="at least 2 entities"):
        main(["data", "synthetic", "--entities", "1", "--facts", "10", "--out", str(tmp_path / "bad")])
