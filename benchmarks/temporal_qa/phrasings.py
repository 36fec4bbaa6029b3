"""How the question templates say each ICEWS05-15 relation in words."""

from typing import NamedTuple


class Phrasing(NamedTuple):
    """One relation's verb phrase: infinitive and simple past."""

    base: str
    past: str


def _regular(base: str, past: str | None = None) -> Phrasing:
    """``base`` with its first word in the simple past (``visit`` -> ``visited``) unless given."""
    verb, _, rest = base.partition(" ")
    tail = f" {rest}" if rest else ""
    return Phrasing(base, past or (verb + "d" if verb.endswith("e") else verb + "ed") + tail)


PHRASINGS: dict[str, Phrasing] = {
    "Make statement": Phrasing("make a statement about", "made a statement about"),
    "Consult": _regular("consult"),
    "Express intent to meet or negotiate": _regular("express willingness to meet with"),
    "Make an appeal or request": _regular("appeal to"),
    "Make a visit": _regular("visit"),
    "Host a visit": _regular("host"),
    "Arrest, detain, or charge with legal action": _regular("arrest"),
    "Praise or endorse": _regular("praise"),
    "Criticize or denounce": _regular("condemn"),
    "Accuse": _regular("accuse"),
    "Engage in negotiation": _regular("negotiate with"),
    "Sign formal agreement": _regular("sign an agreement with"),
    "Express intent to cooperate": _regular("offer to cooperate with"),
    "Engage in diplomatic cooperation": _regular("cooperate diplomatically with"),
    "Express intent to engage in diplomatic cooperation (such as policy support)": _regular(
        "express intent to engage in diplomatic cooperation with"
    ),
    "Use conventional military force": _regular("use military force against"),
    "Use unconventional violence": _regular("use violence against"),
    "Demand": Phrasing("make demands of", "made demands of"),
    "Investigate": _regular("investigate"),
    "fight with small arms and light weapons": Phrasing("fight", "fought"),
    "Reject": _regular("reject"),
    "Make optimistic comment": _regular("speak optimistically about", "spoke optimistically about"),
    "Discuss by telephone": _regular("talk on the phone with"),
    "Make pessimistic comment": _regular("speak pessimistically about", "spoke pessimistically about"),
    "Threaten": _regular("threaten"),
    "Engage in symbolic act": _regular("make a symbolic gesture toward", "made a symbolic gesture toward"),
    "Demonstrate or rally": _regular("demonstrate against"),
    "Appeal for diplomatic cooperation (such as policy support)": _regular(
        "call for diplomatic support from"
    ),
    "Meet at a 'third' location": _regular("meet on neutral ground with", "met on neutral ground with"),
    "Return, release person(s)": _regular("release detainees to"),
    "Abduct, hijack, or take hostage": _regular("abduct"),
    "Provide humanitarian aid": _regular("provide humanitarian aid to"),
    "Make empathetic comment": _regular("express sympathy for"),
    "Confiscate property": _regular("confiscate property from"),
    "Deny responsibility": Phrasing("deny responsibility toward", "denied responsibility toward"),
    "Protest violently, riot": Phrasing("riot against", "rioted against"),
    "Reduce relations": _regular("reduce relations with"),
    "Physically assault": _regular("assault"),
    "Provide aid": _regular("provide aid to"),
    "Expel or deport individuals": _regular("expel people from", "expelled people from"),
}
