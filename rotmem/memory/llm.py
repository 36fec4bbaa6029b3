"""Where a language model plugs into the memory: a fact extractor and a reader.

Neither is needed to store or retrieve; both are plain callables, so a function, a class with
``__call__`` or a client object all work, and tests use fakes.

- ``FactExtractor``: ``extractor(text, date) -> facts`` reads one session's text (told on ``date``,
  days since 1970-01-01) and returns ``ExtractedFact`` items or ``(subject, relation, object)`` /
  ``(subject, relation, object, t_happen)`` tuples. ``TemporalMemory(extractor=...)`` calls it for a
  session added with ``facts=None``; what it returns is checked like any fact (a malformed item
  raises a ``ValueError`` naming the session and the item) and then checked against the text.
- ``Reader``: ``reader(question, evidence) -> answer`` answers from the rendered evidence lines
  (``TemporalMemory.answer``; the benchmarks' ``--generate module:name``). ``PromptReader`` turns a
  text-completion function ``generate(prompt) -> str`` into a reader with one prompt template.

An OpenAI-compatible HTTP reader is a few lines (docs/memory.md); nothing here opens a connection.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from rotmem.memory.records import ExtractedFact, check_fact

PROMPT = (
    "Answer the question from the memory evidence below. Lines marked [historical] are no longer "
    "true.\nEvidence:\n{evidence}\nQuestion: {question}\nAnswer briefly.\n"
)


@runtime_checkable
class FactExtractor(Protocol):
    """``extractor(text, date) -> facts`` (module docs); ``date`` in days since 1970-01-01."""

    def __call__(self, text: str, date: int) -> Iterable[ExtractedFact | Sequence[Any]]: ...


@runtime_checkable
class Reader(Protocol):
    """``reader(question, evidence) -> answer`` (module docs)."""

    def __call__(self, question: str, evidence: str) -> str: ...


class PromptReader:
    """A ``Reader`` from ``generate(prompt) -> str``: the prompt is ``template`` filled with
    ``{evidence}`` and ``{question}``; the answer is the completion, stripped."""

    def __init__(self, generate: Callable[[str], str], template: str = PROMPT):
        if "{evidence}" not in template or "{question}" not in template:
            raise ValueError("the prompt template needs {evidence} and {question}")
        self.generate, self.template = generate, template

    def __call__(self, question: str, evidence: str) -> str:
        answer = self.generate(self.template.format(evidence=evidence, question=question))
        if not isinstance(answer, str):
            raise TypeError(f"generate returned {type(answer).__name__}, expected str")
        return answer.strip()


def extract_facts(extractor: FactExtractor, text: str, date: int, where: str) -> list[ExtractedFact]:
    """The extractor's facts for one session as ``ExtractedFact`` items, each checked; a malformed
    item raises a ``ValueError`` naming ``where`` and the item."""
    out = []
    for i, item in enumerate(extractor(text, date)):
        if isinstance(item, ExtractedFact):
            check_fact(item, f"{where}, extracted fact {i}")
            out.append(item)
            continue
        if isinstance(item, str | bytes) or not isinstance(item, Sequence) or len(item) not in (3, 4):
            raise ValueError(
                f"{where}, extracted fact {i}: expected (subject, relation, object[, t_happen]) or an "
                f"ExtractedFact, got {item!r}"
            )
        subject, relation, obj = check_fact(tuple(item[:3]), f"{where}, extracted fact {i}")
        out.append(ExtractedFact(subject, relation, obj, item[3] if len(item) == 4 else None))
    return out


def load_plugin(spec: str, label: str) -> Callable[..., Any]:
    """``"package.module:name"`` -> the callable it names (a class is instantiated without
    arguments); a bad spec raises a ``ValueError`` naming it as ``label``."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{label} is named package.module:name, got {spec!r}")
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"cannot load {label} {spec!r}: {error}") from None
    plugin = target() if isinstance(target, type) else target
    if not callable(plugin):
        raise ValueError(f"{label} {spec!r} is not callable")
    return plugin


def load_reader(spec: str) -> Reader:
    """``"package.module:name"`` -> the ``Reader`` it names (``load_plugin``)."""
    return load_plugin(spec, "reader")
