"""Likely updates: does a person's new memory change what an earlier one of theirs says?

Deterministic English rules over plain text, weighed as evidence rather than
matched as a list.  A new memory likely updates an earlier one when three
kinds of evidence meet:

* **who**: a clause of the new memory states something about the person
  (``I``/``we``, a subject-less clause such as "Sold the car", ``my`` thing,
  or an outside agent acting on their thing: "the optician moved my
  appointment"), or about whom the earlier memory names ("Leo" in "My son Leo
  …").  Another person ("my cousin", "my mum's number", a name the earlier
  memory does not hold), the listener ("you"), a question, or another
  speaker's words (both memories labelled "Name: …" with different names)
  change nothing of the person's;
* **same slot**: the two share content words that are much of what the earlier
  memory said, weighed by how rare they are among the person's memories
  (BM25's idf, from the retrieval index), both hold a value of one kind (a
  phone number, an email, a date, an amount, a weekday), or the claim rules
  (projections.claims.rules) read first-person claims of one predicate class
  in both ("I live in …", "I moved to …");
* **change**: in the clauses about them, a verb of changing state (moved,
  switched, sold, cancelled, retired, started …, in any inflection: matched on
  the stem), a marker of a new state ("now", "anymore", "no longer",
  "instead", "after all", "new"), or a new value for "my X is …".  A one-off
  ("today", "for the weekend"), a plan or a guess ("I'll", "thinking about",
  "maybe"), or "still" / "stayed" weigh against it.

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
from projections.claims.rules import RuleClaimExtractor, sentence_spans
from projections.lexical import STOP_WORDS

NAME = "oblivio.updates.en"
#: 1: the rules of this module (see its docstring).  2: a change verb that is denied,
#: planned or someone else's ("I won't quit", "gonna start", "when you started"), a start
#: long before ("years ago", "as a kid"), "new" of things added ("some new customers")
#: and "now" of a state that goes on ("for a year now", "right now") are no change.
VERSION = 2
#: Below this confidence nothing is recorded.
THRESHOLD = 0.5
#: The least share of the earlier memory's words (by idf) that shared words must cover.
MIN_COVERAGE = 0.15

_WORD = re.compile(r"[\w'’-]+")
_SPEAKER = re.compile(r"^\s*(?P<name>[A-Z][\w.' -]{0,40}?):\s")
_NAME = re.compile(r"\b[A-Z][a-z]+\b")
_CLAUSE = re.compile(
    r"[;:!?]|,\s*|\s+-\s+|\.\s+"
    r"|\b(?:and|but|so|because|since|after(?!\s+all)|then|said|says|that)(?=\s)",
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
# A change long before (a start years ago, in childhood) is the history of a state that
# still holds, not news since the earlier memory: "I started playing guitar five years ago".
_LONG_AGO = re.compile(
    r"\b(?:years\s+ago|decades?\s+ago|when\s+(?:i|we)\s+was\s+(?:a\s+)?(?:kid|child|young|little|"
    r"teen\w*|small)|as\s+a\s+(?:kid|child|teen\w*)|since\s+(?:i|we)\s+w(?:as|ere)\s+(?:a\s+)?"
    r"(?:kid|child|young|little|teen\w*|small))\b",
    re.IGNORECASE,
)
_TENTATIVE = re.compile(
    r"\b(?:i'll|we'll|will|might|maybe|perhaps|thinking\s+(?:about|of)|considering|"
    r"gonna|wanna|let's|"
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
# A change verb right after one of these did not happen, or has not yet: "I won't quit",
# "don't give up", "never moved", "not gonna switch".
_NOT_DONE = frozenset(
    ["not", "never", "won't", "wont", "don't", "dont", "didn't", "can't", "cannot", "gonna"]
)
#: How many words before a change verb are looked at for :data:`_NOT_DONE`.
_NOT_DONE_REACH = 3
# Subjects that are neither the person nor what they own: "now you're helping others".
_OTHER_SUBJECTS = frozenset(
    ["you", "you're", "you've", "he", "he's", "she", "she's", "they", "they're", "it's"]
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
    """An earlier memory of the person (one of those retrieval ranks nearest the new one)."""

    node_id: uuid.UUID
    text: str


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
    clauses = _clauses(new_text)
    if not clauses:
        return None
    against = _against_cues(new_text)
    # The earlier memory that shares the most of the slot (not the most confident).
    best: tuple[Decision, float] | None = None
    for candidate in candidates:
        if _same(candidate.text, new_text) or _other_speaker(candidate.text, new_text):
            continue
        weighed = _weigh(new_text, clauses, candidate, against, idf)
        if weighed is not None and (best is None or weighed[1] > best[1]):
            best = weighed
    return None if best is None else best[0]


def _weigh(
    new_text: str,
    clauses: list[_Clause],
    candidate: Candidate,
    against: list[str],
    idf: dict[str, float],
) -> tuple[Decision, float] | None:
    """The decision for one earlier memory and how much of the slot they share."""
    old_words = _words(candidate.text)
    about = _about_them(clauses, candidate.text)
    if not about:
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
    predicates = _predicates(candidate.text) & _predicates(new_text)
    # A change counts only where it is said of them (not in a question, not of the
    # listener or someone else) and where the slot is: in a statement that shares a
    # word, a kind of value or a predicate class with the earlier memory.  A change verb the
    # earlier memory used itself ("adoption" … "adopt") names the topic, not a change.
    where = [c for c in about if _holds_slot(c.text, shared, kinds, predicates)]
    change = _change_cues(" . ".join(c.text for c in where), where)
    cues = [c for c in change if c.removeprefix("change_verb:") not in shared]
    attribute = _new_attribute_value(candidate.text, new_text)
    if attribute:
        cues.append("new_value_for_attribute")
    slot: list[str] = []
    if coverage >= MIN_COVERAGE and shared - _WEAK_ANCHORS:
        slot.append("shared_words")
    slot += [f"same_kind:{k}" for k in kinds]
    slot += [f"same_predicate:{c}" for c in sorted(predicates)]
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
    ``text`` ("I live in Utrecht" and "I moved to Ghent" are both of residence)."""
    plan = RuleClaimExtractor().plan(Message(text=_ADVERB.sub(r"\1 ", text), role="user"))
    return frozenset(
        cls
        for claim in plan.claims
        if claim.subject == "first_person" and claim.predicate != "is"
        for cls in target_classes(claim)
    )


def _same(a: str, b: str) -> bool:
    return _words(a) == _words(b)


def _holds_slot(
    sentence: str, shared: set[str], kinds: Sequence[str], predicates: frozenset[str]
) -> bool:
    """Whether ``sentence`` carries the slot the two memories share."""
    return (
        bool(_stems(_words(sentence)) & shared)
        or any(_VALUE_KINDS[k].search(sentence) for k in kinds)
        or bool(_predicates(sentence) & predicates)
    )


@dataclass(frozen=True)
class _Clause:
    text: str
    words: list[str]
    #: Part of a question ("Anything new?"): it states nothing.
    asks: bool
    #: Which sentence of the memory it is part of.
    sentence: int

    def joined(self, after: _Clause) -> _Clause:
        """This clause and the one that goes on with its subject, as one statement."""
        text = f"{self.text} and {after.text}"
        return _Clause(text, self.words + after.words, self.asks, self.sentence)


def _clauses(text: str) -> list[_Clause]:
    """The clauses of ``text`` of two words or more (a lone "Name:" label is none)."""
    found: list[_Clause] = []
    for number, (start, end) in enumerate(sentence_spans(text)):
        sentence = text[start:end]
        asks = sentence.rstrip().endswith("?")
        for part in _CLAUSE.split(sentence):
            words = _words(part) if part else []
            if len(words) >= 2:
                found.append(_Clause(part, words, asks, number))
    return found


def _other_speaker(old_text: str, new_text: str) -> bool:
    """Whether both memories are labelled with their speaker ("Ana: …") and the
    speakers differ: one person's words do not update another's."""
    old, new = _SPEAKER.match(old_text), _SPEAKER.match(new_text)
    return old is not None and new is not None and old["name"] != new["name"]


def _change_cues(text: str, clauses: Sequence[_Clause]) -> list[str]:
    """What in the new memory says that something changed."""
    cues: list[str] = []
    strong = sorted({s for clause in clauses for s in _done_changes(clause.words)})
    cues += [f"change_verb:{s}" for s in strong[:3]]
    if any(not _not_done(_words(text[: m.start()])) for m in _PARTICLES.finditer(text)):
        cues.append("change_verb:phrasal")
    markers = sorted(
        {m.group(0).casefold() for m in _STATE_MARKERS.finditer(text) if not _adds(text, m)}
    )
    cues += [f"marker:{m}" for m in markers[:3]]
    return cues


# "new" before a plural or after a quantity adds things ("some new customers", "new
# pieces for my store"); it replaces one only in the singular ("my new number").
_QUANTITY = re.compile(r"\b(?:some|any|many|more|few|several|lots\s+of|a\s+lot\s+of)\s+$", re.I)
_PLURAL = re.compile(r"[a-z'-]*[^s'\W]s", re.IGNORECASE)


# "now" after these is no news: "right now", "bye for now", "for a year now" (a state that
# has held for a while), "now that …" is a reason.
_STILL_NOW = re.compile(
    r"\b(?:right|for|by|until|till|up\s+to|years?|months?|weeks?|days?|while|ages)\s+$",
    re.IGNORECASE,
)


def _adds(text: str, marker: re.Match[str]) -> bool:
    """Whether a state marker at ``marker`` says nothing was replaced: ``new`` of things
    added (its noun, the next word or the one after a describing word, is plural, or a
    quantity comes before it), or ``now`` of a state that goes on (:data:`_STILL_NOW`)."""
    said = marker.group(0).casefold()
    if said == "now":
        before = text[: marker.start()]
        return _STILL_NOW.search(before) is not None or text[marker.end() :].startswith(" that")
    if said != "new":
        return False
    if _QUANTITY.search(text[: marker.start()]):
        return True
    following = _WORD.findall(text[marker.end() :])[:2]
    if following and following[0].casefold() in STOP_WORDS:
        return False
    return any(_PLURAL.fullmatch(word) and word.casefold() not in STOP_WORDS for word in following)


def _done_changes(words: list[str]) -> list[str]:
    """The stems of the change verbs of a clause that say something changed (not
    negated, not a plan: "I won't quit" changes nothing)."""
    stems: list[str] = _stemmer().stemWords(words)
    return [
        stem
        for place, stem in enumerate(stems)
        if stem in _CHANGE_STEMS and not _not_done(words[max(0, place - _NOT_DONE_REACH) : place])
    ]


def _not_done(before: list[str]) -> bool:
    """Whether the words just before a change verb say it did not happen (yet), or that
    someone else did it ("when you started")."""
    window = before[-_NOT_DONE_REACH:]
    return bool(_NOT_DONE.intersection(window) or _OTHER_SUBJECTS.intersection(window))


def _against_cues(text: str) -> list[str]:
    """What says the new memory is a one-off, a plan or a guess, or that nothing moved."""
    found = [f"one_off:{m.group(0).casefold()}" for m in _ONE_OFF.finditer(text)]
    found += [f"tentative:{m.group(0).casefold()}" for m in _TENTATIVE.finditer(text)]
    found += [f"long_ago:{m.group(0).casefold()}" for m in _LONG_AGO.finditer(text)]
    if found and _STATE_MARKERS.search(text) and not _TENTATIVE.search(text):
        return []  # "on Saturdays now", "today I moved … for good": the marker outweighs
    return found


def _about_them(clauses: list[_Clause], old_text: str) -> list[_Clause]:
    """The clauses of the new memory that state something about the person, or about
    whom the earlier memory is about (see the module docstring)."""
    old_subject = _subject(_words(old_text))
    # Names the earlier memory holds ("Mila", "Dr Mensah"), not its first word.
    names = {m.group(0).casefold() for m in _NAME.finditer(old_text) if m.start() > 0}
    about: list[_Clause] = []
    previous = False
    for clause in clauses:
        # "… and work from home": a clause that starts with its verb goes on with the
        # subject of the clause before it, and is read as one statement with it.
        continues = previous and clause.words[0] not in _NOT_A_VERB
        if continues and about and about[-1].sentence == clause.sentence and not clause.asks:
            about[-1] = about[-1].joined(clause)
            continue
        previous = _clause_about_them(clause.words, names, old_subject)
        if previous and not clause.asks:
            about.append(clause)
    return about


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


def _clause_about_them(clause: list[str], names: set[str], old_subject: tuple[str, ...]) -> bool:
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
        # An outside agent acting on their thing: "the optician moved my appointment",
        # "the airline cancelled the Friday flight" (the flight the earlier memory names).
        agent = [w for w in subject[1:] if w.removesuffix("'s") in _PEOPLE]
        theirs = "my" in clause or bool(_stems(clause) & _stems(old_subject))
        return not agent and theirs
    if first in names:
        return True  # named in the earlier memory: "Leo moved up a year"
    # A subject-less clause ("Sold the car", "New phone number: …") is the speaker's;
    # a name the earlier memory does not know is somebody else.
    return (
        first[:1].isdigit()
        or (first in _WORDS_STARTING_FRAGMENTS and not _OTHER_SUBJECTS.intersection(clause[1:3]))
        or first.endswith("ed")
        or _stemmer().stemWord(first) in _CHANGE_STEMS  # "Sold the Corsa"
    )


# Words a clause with a subject of its own starts with (pronouns, determiners).
_NOT_A_VERB = frozenset(
    [
        "i",
        "we",
        "you",
        "he",
        "she",
        "it",
        "they",
        "my",
        "our",
        "your",
        "his",
        "her",
        "their",
        "the",
        "a",
        "an",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "one",
    ]
)
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
