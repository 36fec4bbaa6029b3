"""``rotmem memory add|search|show`` over a SQLite file."""

from __future__ import annotations

import pytest

from rotmem.cli import main
from rotmem.commands.memory import parse_fact
from rotmem.memory import HashingEncoder, TEMStore


def test_add_search_show(tmp_path, capsys):
    db = str(tmp_path / "mem.db")
    add = ["memory", "add", "--db", db, "--encoder", "hashing"]
    assert main([*add, "--session", "s1", "--fact", "Alice|lives in|Paris", "--fact", "Alice|likes|tea",
                 "--text", "I live in Paris"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "stored 2 fact(s)" in out and "unverified Alice|likes|tea: object not found" in out
    assert main(["memory", "add", "--db", db, "--session", "s2", "--fact", "Alice | moved to | Berlin"]) == 0
    capsys.readouterr()

    assert main(["memory", "search", "--db", db, "where does Alice live", "-k", "5", "--turns", "1"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:3] == [  # the current version first
        "s1: Alice moved to Berlin",
        "s0: Alice lives in Paris [historical]",
        "s0: Alice likes tea",
    ]
    assert "s0: I live in Paris" in out

    assert main(["memory", "show", "--db", db, "--subject", "alice", "--relation", "residence"]) == 0
    out = capsys.readouterr().out
    assert "2 session(s), 3 fact(s)" in out and "s1: Alice moved to Berlin" in out
    with TEMStore(db) as store:
        assert store.encoder.name == "hashing:256"


def test_errors_exit_2_and_store_nothing(tmp_path, capsys):
    db = str(tmp_path / "mem.db")
    assert (
        main(["memory", "add", "--db", db, "--encoder", "hashing", "--session", "s1", "--fact", "a|b|c"]) == 0
    )
    assert main(["memory", "add", "--db", db, "--session", "s1", "--fact", "a|b|d"]) == 2
    assert "already stored" in capsys.readouterr().err
    assert main(["memory", "add", "--db", db, "--session", "s2", "--fact", "a|b"]) == 2
    assert "three non-empty parts" in capsys.readouterr().err
    assert (
        main(["memory", "add", "--db", db, "--encoder", "hashing:32", "--session", "s3", "--fact", "a|b|e"])
        == 2
    )
    assert "hashing:256" in capsys.readouterr().err
    with TEMStore(db) as store:
        assert [r.object for r in store.records()] == ["c"]


def test_search_on_an_empty_store(tmp_path, capsys):
    db = str(tmp_path / "mem.db")
    TEMStore(db, encoder=HashingEncoder()).close()
    assert main(["memory", "search", "--db", db, "anything", "--encoder", "hashing"]) == 0
    assert "(no facts stored)" in capsys.readouterr().out


def test_parse_fact():
    assert parse_fact(" s | lives in |o ") == ("s", "lives in", "o")
    for bad in ("s|r", "s||o", "s|r|o|x"):
        with pytest.raises(ValueError, match="subject\\|relation\\|object"):
            parse_fact(bad)
