"""The LLM plug-in interface, exercised with fakes: an extractor feeds TemporalMemory, a reader answers."""

from __future__ import annotations

import sys
import types

import pytest

from rotmem.data import day_of
from rotmem.memory import HashingEncoder, TemporalMemory
from rotmem.memory.llm import FactExtractor, PromptReader, Reader, load_reader
from rotmem.memory.records import ExtractedFact


class FakeExtractor:
    """Reads "<name> moved to <city>" lines; dates the move at the session date."""

    def __init__(self):
        self.calls: list[tuple[str, int]] = []

    def __call__(self, text: str, date: int):
        self.calls.append((text, date))
        for line in text.splitlines():
            name, _, city = line.partition(" moved to ")
            if city:
                yield ExtractedFact(name, "moved to", city.strip(" ."), date, sources=(line[:8],))


def test_an_extractor_supplies_the_facts_of_a_session_added_without_them():
    extractor = FakeExtractor()
    assert isinstance(extractor, FactExtractor)
    memory = TemporalMemory(encoder=HashingEncoder(64), extractor=extractor)
    memory.add_session("s1", None, date="2020-01-05", text="Ann moved to Oslo.")
    memory.add_session("s2", None, date="2021-02-01", text="Ann moved to Lima.\nnothing else")
    assert extractor.calls == [
        ("Ann moved to Oslo.", day_of("2020-01-05")),
        ("Ann moved to Lima.\nnothing else", day_of("2021-02-01")),
    ]
    records = memory.store.records("Ann", "residence")
    assert [(r.object, r.historical, r.sources) for r in records] == [
        ("Oslo", True, ("Ann move",)),
        ("Lima", False, ("Ann move",)),
    ]
    assert [f.t_happen for f in memory.facts()] == [day_of("2020-01-05"), day_of("2021-02-01")]


def test_extracted_tuples_are_checked_and_named():
    memory = TemporalMemory(encoder=HashingEncoder(64), extractor=lambda text, date: [("Ann", "likes", "")])
    with pytest.raises(ValueError, match=r"session 's1', extracted fact 0"):
        memory.add_session("s1", None, date="2020-01-01", text="x")
    memory = TemporalMemory(encoder=HashingEncoder(64), extractor=lambda text, date: ["Ann likes tea"])
    with pytest.raises(ValueError, match="extracted fact 0: expected"):
        memory.add_session("s1", None, date="2020-01-01", text="x")
    assert memory.store.sessions() == []  # nothing written
    no_extractor = TemporalMemory(encoder=HashingEncoder(64))
    with pytest.raises(ValueError, match="needs an extractor"):
        no_extractor.add_session("s1", None, date="2020-01-01", text="x")
    tuple_extractor = TemporalMemory(
        encoder=HashingEncoder(64), extractor=lambda text, date: [("Ann", "likes", "tea", "2019-12-31")]
    )
    tuple_extractor.add_session("s1", None, date="2020-01-01", text="Ann likes tea")
    assert tuple_extractor.facts()[0].t_happen == day_of("2019-12-31")


def test_a_reader_answers_from_the_rendered_evidence():
    memory = TemporalMemory(encoder=HashingEncoder(64))
    memory.add_session("s1", [("Ann", "lives in", "Oslo")], date="2020-01-05")
    memory.add_session("s2", [("Ann", "moved to", "Lima")], date="2021-02-01")
    seen = []

    def reader(question: str, evidence: str) -> str:
        seen.append((question, evidence))
        current = [line for line in evidence.splitlines() if "[historical]" not in line]
        return current[-1].rsplit(" ", 1)[-1]

    assert isinstance(reader, Reader)
    assert memory.answer("Where does Ann live?", reader, k=5) == "Lima"
    assert seen[0][1] == "2021-02-01: Ann moved to Lima\n2020-01-05: Ann lives in Oslo [historical]"


def test_prompt_reader_fills_the_template_and_load_reader_names_bad_specs(monkeypatch):
    prompts = []
    reader = PromptReader(lambda prompt: prompts.append(prompt) or "  Lima \n")
    assert reader("Where?", "Ann moved to Lima") == "Lima"
    assert "Evidence:\nAnn moved to Lima\nQuestion: Where?" in prompts[0]
    with pytest.raises(ValueError, match="template"):
        PromptReader(print, template="no slots")
    module = types.ModuleType("fake_llm_module")
    module.reader = lambda question, evidence: "ok"
    monkeypatch.setitem(sys.modules, "fake_llm_module", module)
    assert load_reader("fake_llm_module:reader")("q", "e") == "ok"
    for spec, message in (("nocolon", "package.module:name"), ("fake_llm_module:missing", "cannot load")):
        with pytest.raises(ValueError, match=message):
            load_reader(spec)


@pytest.mark.slow
def test_importing_the_memory_package_loads_neither_lightning_nor_bm25s():
    import subprocess

    code = (
        "import sys, rotmem.memory, rotmem.memory.retrieval.hybrid, benchmarks.locomo; "
        "print(sorted(m for m in sys.modules if 'lightning' in m or m.startswith('bm25s')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]"
