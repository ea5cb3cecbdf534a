"""Likely updates: does a person's new memory change what an earlier one of theirs says?

Deterministic English rules over plain text, weighed as evidence rather than
matched as a list.  A new memory likely updates an earlier one when three
kinds of evidence meet:

* **who**: a clause of the new memory is about the person (``I``/``we``, a
  subject-less clause such as "Sold the car", ``my`` thing, or an outside
  agent acting on ``my`` thing: "the optician moved my appointment"), or about
  the very one the earlier memory is about ("Leo" in "My son Leo …").  Another
  person ("my cousin", "my mum's number", a name the earlier memory does not
  know) changes nothing of the person's;
* **same slot**: the two share content words, weighed by how rare they are
  among the person's memories (BM25's idf, from the retrieval index), both
  hold a value of one kind (a phone number, an email, a date, an amount), or
  the claim rules (projections.claims.rules) read first-person claims of one
  predicate class in both ("I live in …", "I moved to …"); when
  nothing is shared, the dense channel may stand in for a strong change, if
  the earlier memory is clearly the new one's nearest;
* **change**: a verb of changing state (moved, switched, sold, cancelled,
  retired, started …, in any inflection: matched on the stem), a marker of a
  new state ("now", "anymore", "no longer", "instead", "after all", "new"),
  a negation of what was said, or a new value for "my X is …".  A one-off
  ("today", "on Saturday", "for the weekend"), a plan or a guess ("I'll",
  "thinking about", "maybe"), or "still" / "stayed" weigh against it.

The outcome names the cues that decided it, the rule set and its version and
a confidence: it becomes the ``memory.likely_update`` event, so replay never
runs these rules again.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import Stemmer

from projections.claims.matching import target_classes
from projections.claims.plan import Message
from projections.claims.rules import RuleClaimExtractor
from projections.lexical import STOP_WORDS

NAME = "oblivio.updates.en"
#: 1: the rules of this module (see its docstring).
VERSION = 1
#: Below this confidence nothing is recorded.
THRESHOLD = 0.5
#: The least share of the earlier memory's words (by idf) that shared words must cover.
MIN_COVERAGE = 0.15
#: A dense-only slot (no shared word, no shared kind of value) needs a cosine this high
#: and this far above the next candidate's.
DENSE_FLOOR = 0.35
DENSE_MARGIN = 0.05

_WORD = re.compile(r"[\w'’-]+")
_CLAUSE = re.compile(
    r"[;:!?]|,\s*|\s+-\s+|\.\s+|\b(?:and|but|so|because|since|after|then|said|says|that)\b",
    re.IGNORECASE,
)

# Verbs whose past or present says a state changed; matched on their stems.
_CHANGE_VERBS = """
    move relocate switch change leave left quit sell sold cancel reschedule stop finish start
    join transfer migrate retire close end replace drop swap upgrade downgrade became become
    engaged married divorced separated adopt died passed lapse retrain shift raise lower
    increase decrease convert rename resign graduate promote enrol enroll
"""
# Verbs that also describe a one-off ("I took a taxi", "I got a cold") count only with a
# particle or object that makes them a change ("took up", "gave up", "got rid of", "got
# engaged", "put away", "signed up", "cut out", "bought a house").
_PARTICLES = re.compile(
    r"\b(?:took|take|taken|gave|give|given|got|put|signed|sign|cut)\s+"
    r"(?:up|out|away|over|off|rid|engaged|married|divorced|in\s+a|on)\b"
    r"|\bbought\s+(?:a|an|our|my)\s+(?:own\s+)?(?:house|flat|home|place|apartment)\b"
    r"|\btook\s+(?:my|his|her|their)\s+\w+'s\s+name\b",
    re.IGNORECASE,
)
_STATE_MARKERS = re.compile(
    r"\b(?:now|anymore|any\s+more|no\s+longer|no\s+more|instead|after\s+all|these\s+days|"
    r"nowadays|new|newly|not\s+any\s+longer|turns\s+out|actually|from\s+now\s+on|"
    r"behind\s+(?:me|us)|gone\s+off|fully)\b",
    re.IGNORECASE,
)
_ONE_OFF = re.compile(
    r"\b(?:today|tonight|yesterday|this\s+(?:morning|afternoon|evening|week|weekend|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)|for\s+the\s+(?:day|weekend|"
    r"night)|just\s+for\s+fun|on\s+holiday|once|for\s+a\s+(?:day|night|bit)|"
    r"on\s+(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
    r"(?!\s+(?:mornings|afternoons|evenings|nights))\b)",
    re.IGNORECASE,
)
_TENTATIVE = re.compile(
    r"\b(?:i'll|we'll|will|might|maybe|perhaps|thinking\s+(?:about|of)|considering|"
    r"plan(?:ning)?\s+to|going\s+to|would|could|looked\s+at|read\s+(?:an?|about)|"
    r"stayed|stay|still|recommended|suggested)\b",
    re.IGNORECASE,
)
# People other than the person: a clause whose subject is one of them (or their
# thing: "my mum's number") speaks of someone else.
_PEOPLE = frozenset(
    [
        "mum",
        "mom",
        "mother",
        "dad",
        "father",
        "parent",
        "parents",
        "brother",
        "sister",
        "sibling",
        "cousin",
        "aunt",
        "uncle",
        "niece",
        "nephew",
        "grandma",
        "grandpa",
        "grandmother",
        "grandfather",
        "granny",
        "son",
        "daughter",
        "kid",
        "kids",
        "child",
        "children",
        "husband",
        "wife",
        "partner",
        "boyfriend",
        "girlfriend",
        "fiance",
        "fiancee",
        "friend",
        "friends",
        "colleague",
        "colleagues",
        "coworker",
        "neighbour",
        "neighbor",
        "neighbours",
        "neighbors",
        "boss",
        "flatmate",
        "roommate",
        "housemate",
        "in-laws",
        "family",
    ]
)
_SELF = frozenset({"i", "we", "i'm", "we're", "i've", "we've", "i'd", "i'll", "we'll"})
_POSSESSIVE = frozenset({"my", "our"})
_ARTICLES = frozenset({"the", "a", "an", "this", "that", "one"})

# Kinds of value: two memories that each hold one of the same kind share a slot.
_VALUE_KINDS = {
    "email": re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+"),
    "phone": re.compile(r"(?<![\w.])\+?\d[\d ()-]{6,}\d"),
    "money": re.compile(r"[£$€]\s?\d[\d,.]*"),
    "weekday": re.compile(r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b", re.IGNORECASE),
    "date": re.compile(
        r"\b\d{1,2}(?:st|nd|rd|th)?\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)\w*"
        r"|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)\w*\s+\d{1,2}\b",
        re.IGNORECASE,
    ),
}
_MY_ATTRIBUTE = re.compile(
    r"\bmy\s+(?:new\s+)?(?P<attr>[\w\s-]{2,30}?)\s+(?:is|are)\s+(?P<value>.+)$", re.I
)


@dataclass(frozen=True)
class Candidate:
    """An earlier memory of the person, with how the retrieval channels match it to the
    new memory's text."""

    node_id: uuid.UUID
    text: str
    similarity: float = 0.0


@dataclass(frozen=True)
class Decision:
    """The new memory likely updates ``old_node_id``: why, and how sure."""

    old_node_id: uuid.UUID
    confidence: float
    cues: tuple[str, ...]
    rule: str
    detector: str = NAME
    version: int = VERSION


@lru_cache(maxsize=1)
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def _words(text: str) -> list[str]:
    return [w.replace("’", "'").casefold() for w in _WORD.findall(text)]


def _stems(words: Iterable[str]) -> set[str]:
    # "wife's" counts as "wife"; "I'm", "don't" are function words.
    plain = [w.strip("'-").removesuffix("'s") for w in words]
    plain = [w for w in plain if "'" not in w]
    parts = [p for w in plain for p in w.split("-") if p]
    content = [p for p in parts if p not in STOP_WORDS and len(p) > 1]
    found: list[str] = _stemmer().stemWords(content)
    return set(found)


_CHANGE_STEMS = frozenset(_stemmer().stemWords(_CHANGE_VERBS.split()))
_WEAK_ANCHORS = _CHANGE_STEMS | frozenset(
    _stemmer().stemWords(
        ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "left"]
    )
)
#: Words that say "a change" without naming the slot: never evidence of the same slot.
_MARKER_STEMS = frozenset(
    _stemmer().stemWords(
        [
            "now",
            "anymore",
            "longer",
            "more",
            "instead",
            "new",
            "newly",
            "actually",
            "days",
            "nowadays",
            "finally",
        ]
    )
)


def may_update(new_text: str) -> bool:
    """Whether ``new_text`` holds any evidence of a change (a change verb or marker, or
    "my X is …"): only then are earlier memories looked up and weighed.  Cheap, so a
    memory that changes nothing costs a few regular expressions."""
    clauses = [c for c in _clauses(new_text) if c]
    return bool(_change_cues(new_text, clauses)) or _MY_ATTRIBUTE.search(new_text) is not None


def detect(
    new_text: str, candidates: Sequence[Candidate], idf: dict[str, float]
) -> Decision | None:
    """The earlier memory ``new_text`` most likely updates, if the evidence suffices.

    ``idf`` weighs each stem by its rarity among the person's memories (stems it
    lacks weigh as the rarest).
    """
    clauses = [c for c in _clauses(new_text) if c]
    if not clauses:
        return None
    change = _change_cues(new_text, clauses)
    against = _against_cues(new_text)
    # The earlier memory that shares the most of the slot (not the most confident).
    best: tuple[Decision, float] | None = None
    dense = sorted(candidates, key=lambda c: -c.similarity)
    for candidate in candidates:
        if _same(candidate.text, new_text):
            continue
        weighed = _weigh(new_text, clauses, candidate, change, against, idf, dense)
        if weighed is not None and (best is None or weighed[1] > best[1]):
            best = weighed
    return None if best is None else best[0]


def _weigh(
    new_text: str,
    clauses: list[list[str]],
    candidate: Candidate,
    change: list[str],
    against: list[str],
    idf: dict[str, float],
    dense: Sequence[Candidate],
) -> tuple[Decision, float] | None:
    """The decision for one earlier memory and how much of the slot they share."""
    old_words = _words(candidate.text)
    if not _about_them(clauses, old_words):
        return None
    rarest = max(idf.values(), default=1.0)
    # Words that say "a change" ("behind us", "now") name no slot; a change verb or a
    # number shared with another memory ("left", "two") is weak evidence of one.
    said = _STATE_MARKERS.sub(" ", new_text)
    shared = (_stems(_words(said)) & _stems(old_words)) - _MARKER_STEMS
    overlap = sum(idf.get(s, rarest) * (0.3 if s in _WEAK_ANCHORS else 1.0) for s in shared)
    # What they share must be much of what the earlier memory says, not one word of a
    # long turn: the share of its idf mass the new memory repeats.
    said_before = sum(idf.get(s, rarest) for s in _stems(old_words) - _MARKER_STEMS)
    coverage = overlap / said_before if said_before else 0.0
    kinds = [k for k, p in _VALUE_KINDS.items() if p.search(new_text) and p.search(candidate.text)]
    if "weekday" in kinds:
        # "Flying on Saturday" after "leaves on Friday": the day is the slot's new value.
        against = [a for a in against if not a.startswith("one_off:on ")]
    cues = list(change)
    attribute = _new_attribute_value(candidate.text, new_text)
    if attribute:
        cues.append("new_value_for_attribute")
    slot: list[str] = []
    if overlap >= 0.5 and coverage >= MIN_COVERAGE:
        slot.append("shared_words")
    slot += [f"same_kind:{k}" for k in kinds]
    predicates = _predicates(candidate.text) & _predicates(new_text)
    slot += [f"same_predicate:{c}" for c in sorted(predicates)]
    if not slot and _nearest(candidate, dense) and any(not c.startswith("marker") for c in change):
        slot.append("nearest_meaning")
    if not slot or not cues or against:
        return None
    strength = len(cues) + 0.5 * len(slot) + min(overlap, 6.0) / 6.0
    confidence = round(1 - math.exp(-strength), 3)
    if confidence < THRESHOLD:
        return None
    decision = Decision(candidate.node_id, confidence, tuple(cues + slot), "change_in_same_slot")
    return decision, overlap + len(kinds) + (2.0 if attribute else 0.0)


# Adverbs a speaker puts between "I" and the verb ("I finally moved to …"), which the
# claim rules do not expect there.
_ADVERB = re.compile(
    r"\b(i|we)\s+(?:finally|just|recently|eventually|already|also|officially)\s+", re.I
)


@lru_cache(maxsize=4096)
def _predicates(text: str) -> frozenset[str]:
    """The predicate classes of the first-person claims the rule extractor finds in
    ``text`` ("I live in Leeds" and "I moved to Bristol" are both of residence)."""
    plan = RuleClaimExtractor().plan(Message(text=_ADVERB.sub(r"\1 ", text), role="user"))
    return frozenset(
        cls
        for claim in plan.claims
        if claim.subject == "first_person" and claim.predicate != "is"
        for cls in target_classes(claim)
    )


def _nearest(candidate: Candidate, dense: Sequence[Candidate]) -> bool:
    """Whether the candidate is clearly the new memory's nearest in meaning."""
    if not dense or dense[0].node_id != candidate.node_id:
        return False
    runner_up = dense[1].similarity if len(dense) > 1 else 0.0
    return candidate.similarity >= DENSE_FLOOR and candidate.similarity - runner_up >= DENSE_MARGIN


def _same(a: str, b: str) -> bool:
    return _words(a) == _words(b)


def _clauses(text: str) -> list[list[str]]:
    return [_words(part) for part in _CLAUSE.split(text) if part and part.strip()]


def _change_cues(text: str, clauses: list[list[str]]) -> list[str]:
    """What in the new memory says that something changed."""
    cues: list[str] = []
    stems = _stemmer().stemWords([w for clause in clauses for w in clause])
    strong = sorted({s for s in stems if s in _CHANGE_STEMS})
    cues += [f"change_verb:{s}" for s in strong[:3]]
    if _PARTICLES.search(text):
        cues.append("change_verb:phrasal")
    markers = sorted({m.group(0).casefold() for m in _STATE_MARKERS.finditer(text)})
    cues += [f"marker:{m}" for m in markers[:3]]
    return cues


def _against_cues(text: str) -> list[str]:
    """What says the new memory is a one-off, a plan or a guess, or that nothing moved."""
    found = [f"one_off:{m.group(0).casefold()}" for m in _ONE_OFF.finditer(text)]
    found += [f"tentative:{m.group(0).casefold()}" for m in _TENTATIVE.finditer(text)]
    if found and _STATE_MARKERS.search(text) and not _TENTATIVE.search(text):
        return []  # "on Saturdays now", "today I moved … for good": the marker outweighs
    return found


def _about_them(clauses: list[list[str]], old_words: list[str]) -> bool:
    """Whether a clause of the new memory is about the person, or about whom the
    earlier memory is about (see the module docstring)."""
    old = set(old_words)
    old_subject = _subject(old_words)
    return any(_clause_about_them(clause, old, old_subject) for clause in clauses)


def _subject(words: list[str]) -> tuple[str, ...]:
    """The words before a clause's first verb-like word, without determiners."""
    head: list[str] = []
    for word in words:
        if word in {"is", "are", "was", "were", "has", "have", "had", "'s"} or (
            head and (word.endswith("ed") or word in _CHANGE_STEMS)
        ):
            break
        head.append(word)
        if len(head) >= 4:
            break
    return tuple(head)


def _clause_about_them(clause: list[str], old: set[str], old_subject: tuple[str, ...]) -> bool:
    first = clause[0]
    if first in _SELF:
        return True
    subject = _subject(clause)
    if first in _POSSESSIVE:
        person = [w for w in subject[1:] if w.removesuffix("'s") in _PEOPLE]
        if not person:
            return True  # my own thing
        # My parents, my son: only when the earlier memory is about the same one.
        return tuple(subject[:2]) == tuple(old_subject[:2]) and not any(
            w.endswith("'s") for w in subject
        )
    if first in _ARTICLES:
        agent = [w for w in subject[1:] if w.removesuffix("'s") in _PEOPLE]
        return not agent and "my" in clause  # the airline cancelled my flight
    if first in old:
        return True  # named in the earlier memory: "Leo moved up a year"
    # A subject-less clause ("Sold the car", "New phone number: …") is the speaker's;
    # a name the earlier memory does not know is somebody else.
    return not first[:1].isalpha() or first in _WORDS_STARTING_FRAGMENTS or first.endswith("ed")


_WORDS_STARTING_FRAGMENTS = frozenset(
    ["new", "just", "finally", "since", "no", "not", "one", "after", "from", "back", "now", "these"]
)


def _new_attribute_value(old_text: str, new_text: str) -> bool:
    """ "My X is Y" said before, "my X is Z" now: a new value in a single-valued slot."""
    old = _MY_ATTRIBUTE.search(old_text)
    new = _MY_ATTRIBUTE.search(new_text)
    if old is None or new is None:
        return False
    if _stems(_words(old["attr"])) != _stems(_words(new["attr"])):
        return False
    return _stems(_words(old["value"])) != _stems(_words(new["value"]))


def idf_of(stems_by_memory: Sequence[set[str]]) -> dict[str, float]:
    """BM25's idf of each stem over a person's memories (as ``projections.lexical``)."""
    total = len(stems_by_memory)
    counts: dict[str, int] = {}
    for stems in stems_by_memory:
        for stem in stems:
            counts[stem] = counts.get(stem, 0) + 1
    return {s: math.log(1 + (total - n + 0.5) / (n + 0.5)) for s, n in counts.items()}


def stems_of(text: str) -> set[str]:
    """The content stems of a memory, as :func:`detect` compares them."""
    return _stems(_words(text))
