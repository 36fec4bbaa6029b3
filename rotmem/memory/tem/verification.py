"""Checking extracted facts against the session text before they are written (TEM's write path).

Rule: a fact is verified when its **object** occurs in the text as whole words, case-insensitively,
with any run of whitespace matching any other (``"New  York"`` matches ``"new york"``; ``"Paris"``
does not match inside ``"Parisian"``). The subject is not checked (it is usually "user" or a
speaker's name that the text never spells out), nor the relation (extractors normalise it).
The match gives the fact's source span. A fact that fails the check is still stored, unverified
(no span): the store never drops a fact. Without a text nothing can be checked.

Lookups are plain ``str.find`` on the lower-cased text (one character per character when
lower-casing keeps the length); a multi-word object is looked up in a whitespace-collapsed copy
(made once per text), and texts whose lower-casing changes their length (e.g. "İ") use an
equivalent regular expression.
"""

from __future__ import annotations

import bisect
import re

Span = tuple[int, int]


class SessionText:
    """A session text prepared for many whole-word, case-insensitive object lookups."""

    def __init__(self, text: str):
        self.text = text
        self.lower = text.lower()
        self.one_to_one = len(self.lower) == len(text)  # lower() never shortens a character
        self._collapsed: tuple[str, list[int], list[Span]] | None = None

    def find(self, obj: str) -> Span | None:
        """``(start, end)`` in the original text of the first whole-word occurrence of ``obj``."""
        if not self.one_to_one:
            return object_span(obj, self.text)
        needle = " ".join(obj.lower().split())
        if " " in needle:  # an exact hit could come after a hit with other whitespace between words
            return self._find_collapsed(needle)
        start = _find_word(self.lower, needle)
        return None if start is None else (start, start + len(needle))

    def _find_collapsed(self, needle: str) -> Span | None:
        """Find ``needle`` in the text with every whitespace run collapsed to one space."""
        if self._collapsed is None:
            words = [m.span() for m in re.finditer(r"\S+", self.lower)]
            starts, position = [], 0
            for a, b in words:
                starts.append(position)
                position += b - a + 1
            self._collapsed = (" ".join(self.lower[a:b] for a, b in words), starts, words)
        collapsed, starts, words = self._collapsed
        start = _find_word(collapsed, needle)
        if start is None:
            return None

        def original(position: int) -> int:
            word = bisect.bisect_right(starts, position) - 1
            return words[word][0] + position - starts[word]

        return original(start), original(start + len(needle) - 1) + 1


def _find_word(haystack: str, needle: str) -> int | None:
    """Start of the first occurrence of ``needle`` in ``haystack`` not inside a longer word."""
    start = haystack.find(needle)
    while start != -1:
        end = start + len(needle)
        if not _word_char_at(haystack, start - 1) and not _word_char_at(haystack, end):
            return start
        start = haystack.find(needle, start + 1)
    return None


def _word_char_at(text: str, position: int) -> bool:
    return 0 <= position < len(text) and (text[position].isalnum() or text[position] == "_")


def object_span(obj: str, text: str) -> Span | None:
    """``(start, end)`` of the first whole-word, case-insensitive occurrence of ``obj`` in ``text``."""
    pattern = r"\s+".join(re.escape(token) for token in obj.split())
    match = re.search(rf"(?<!\w){pattern}(?!\w)", text, flags=re.IGNORECASE)
    return match.span() if match else None
