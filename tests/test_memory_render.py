"""Evidence rendering: labels, session prefixes, subjects written once per run."""

from __future__ import annotations

from rotmem.memory import HashingEncoder, TEMStore, render


def test_grouped_rendering_writes_each_subject_once_per_run():
    store = TEMStore(encoder=HashingEncoder())
    store.add_session("a", [("Alice", "lives in", "Paris"), ("Bob", "drinks", "tea")], text="Paris tea")
    store.add_session("b", [("Alice", "lives in", "Berlin")], text="Berlin")
    records = sorted(
        store.retrieve("Where does Alice live?", k=15), key=lambda r: (r.subject, r.session_index)
    )
    grouped = render(records, show_session=False, group_subjects=True)
    assert grouped.splitlines() == [
        "Alice lives in Paris [historical]",
        "  lives in Berlin",
        "Bob drinks tea",
    ]
    flat = render(records, show_session=False)
    assert flat.splitlines()[1] == "Alice lives in Berlin"
