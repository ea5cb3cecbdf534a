"""The default claim extractor: deterministic English rules, nothing downloaded.

It reads first-person statements a sentence at a time: use / have / own /
like / live in / work as, moved to, switched to, "my X is Y", their
negations ("I don't use X anymore", "I no longer live in X") and explicit
replacements ("I switched from X to Y").  Since version 2 it also reads the
possessive and reflexive forms "X is mine", "X is not mine", "X is no longer
mine", "X belongs to me", "I bought myself X" and "I bought X for myself"
(and their plural "ours" / "us" / "ourselves", which stay plural).  Since
version 3: sentences are found by sentencex, so emails, URLs, decimals,
times and abbreviations ("Dr.", "St.", "e.g.") stay whole; the verbs work
at / for, eat, drink and drive; "I am X" ("I'm a nurse", "I'm vegetarian");
"I used to X", "I'm not X anymore", "I sold X"; "X instead of Y" and "X, not
Y" name what X replaces; "my new X is Y", and a leading "actually", "now" or
"these days", mark an update.  Anything else yields no claim.
English only: other languages simply produce empty plans.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import sentencex

from projections.claims.plan import (
    MAX_CLAIMS_PER_PLAN,
    MAX_OBJECT_CHARS,
    ClaimDraft,
    IngestionPlan,
    Message,
)

_SUBJECT = r"(?P<subject>i|we)"
_VERB = r"(?P<verb>use|have|own|like|love|live in|work as|work at|work for|eat|drink|drive)"
_GERUND = (
    r"(?P<verb>using|having|owning|liking|living in|working as|working at|working for|"
    r"eating|drinking|driving)"
)
_OBJECT = r"(?P<object>.+?)"
_NOW = r"(?:now\s+|currently\s+|still\s+)?"
_DONT = r"(?:do not|don't|dont)"
_LONGER = r"(?:anymore|any more|any longer)"
# What "X is mine" / "X belongs to me" says is owned: not a bare pronoun ("It is mine"),
# and no clause with a personal pronoun of its own ("I know the bike is mine").
_THING = (
    r"(?!(?:it|this|that|these|those|they|he|she|you|what|which|who|everything|"
    r"nothing|all|none|one|the pleasure) (?:is|are|isn't|aren't|belongs|belong)\b)"
    r"(?!.*\b(?:i|we|you|he|she|they|me|us)\b.* (?:is|are|isn't|aren't|belongs|belong) )"
    r"(?P<object>.+?)"
)
_POSSESSIVE = r"(?P<subject>mine|ours)"
_GOT = r"(?:bought|got)"
# "I bought myself …" / "We bought ourselves …": the reflexive agrees with the subject.
_REFLEXIVE = rf"(?:i(?= {_GOT} myself\b)|we(?= {_GOT} ourselves\b)) {_GOT}"

_VERB_PREDICATES = {
    "use": "uses",
    "using": "uses",
    "have": "has",
    "having": "has",
    "own": "owns",
    "owning": "owns",
    "like": "likes",
    "love": "likes",
    "liking": "likes",
    "live in": "lives_in",
    "living in": "lives_in",
    "work as": "works_as",
    "working as": "works_as",
    "work at": "works_at",
    "work for": "works_at",
    "working at": "works_at",
    "working for": "works_at",
    "eat": "eats",
    "eating": "eats",
    "drink": "drinks",
    "drinking": "drinks",
    "drive": "drives",
    "driving": "drives",
}
# "I am", "I'm", "we are", "we're": the contraction has no space before it.
_BE = r"(?: am| are|'m|'re)"
# What "I am X" says one is: a role ("a nurse") or one word ("vegetarian"), never the
# start of a progressive ("I'm moving") or a negation.
_ROLE = (
    r"(?!(?:not|no|never|going|gonna|so|very|really|just|also)\b)(?!\w+ing\b)"
    r"(?P<object>an? .+|[\w-]+)"
)


@dataclass(frozen=True)
class _Rule:
    name: str
    pattern: re.Pattern[str]
    polarity: str
    temporal_intent: str
    predicate: str | None = None  # else from the matched verb


def _rule(
    name: str, pattern: str, polarity: str, intent: str, predicate: str | None = None
) -> _Rule:
    return _Rule(name, re.compile(pattern + r"$", re.IGNORECASE), polarity, intent, predicate)


# Tried in order; the first that matches a sentence makes its claim.
RULES = (
    _rule("no_longer", rf"{_SUBJECT} no longer {_VERB} {_OBJECT}", "negative", "update"),
    _rule("stopped", rf"{_SUBJECT} (?:stopped|quit) {_GERUND} {_OBJECT}", "negative", "update"),
    _rule("not_anymore", rf"{_SUBJECT} {_DONT} {_VERB} {_OBJECT} {_LONGER}", "negative", "update"),
    _rule("not", rf"{_SUBJECT} {_DONT} {_VERB} {_OBJECT}", "negative", "state"),
    _rule(
        "switched",
        rf"{_SUBJECT} (?:have |'ve )?(?:switched|changed) (?:from (?P<old>.+?) )?to {_OBJECT}",
        "positive",
        "update",
        "switched_to",
    ),
    _rule(
        "moved",
        rf"{_SUBJECT} (?:have |'ve )?moved (?:from (?P<old>.+?) )?to {_OBJECT}",
        "positive",
        "update",
        "moved_to",
    ),
    _rule("using", rf"{_SUBJECT}{_BE} {_NOW}using {_OBJECT}", "positive", "state", "uses"),
    _rule("now", rf"{_SUBJECT} now {_VERB} {_OBJECT}", "positive", "update"),
    _rule("plain", rf"{_SUBJECT} {_NOW}{_VERB} {_OBJECT}", "positive", "state"),
    _rule(
        "mine_no_longer",
        r"(?P<subject>my|our) (?P<attribute>.+?) is no longer " + _OBJECT,
        "negative",
        "update",
        "is",
    ),
    _rule(
        "mine_not",
        r"(?P<subject>my|our) (?P<attribute>.+?) (?:is not|isn't) " + _OBJECT,
        "negative",
        "state",
        "is",
    ),
    _rule(
        "mine_now",
        r"(?P<subject>my|our) (?P<attribute>.+?) is now " + _OBJECT,
        "positive",
        "update",
        "is",
    ),
    _rule(
        "mine", r"(?P<subject>my|our) (?P<attribute>.+?) is " + _OBJECT, "positive", "state", "is"
    ),
    # Version 2: "mine", "me" and "myself" (plural "ours", "us", "ourselves").  Appended,
    # so every sentence an earlier rule matched still makes the same claim.
    _rule(
        "no_longer_mine",
        rf"{_THING} (?:is|are) no longer {_POSSESSIVE}",
        "negative",
        "update",
        "owns",
    ),
    _rule(
        "not_mine",
        rf"{_THING} (?:is not|isn't|are not|aren't) {_POSSESSIVE}",
        "negative",
        "state",
        "owns",
    ),
    _rule("is_mine", rf"{_THING} (?:is|are) {_POSSESSIVE}", "positive", "state", "owns"),
    _rule(
        "belongs_to_me",
        rf"{_THING} (?:belongs|belong) to (?P<subject>me|us)",
        "positive",
        "state",
        "owns",
    ),
    _rule(
        "bought_myself",
        rf"{_REFLEXIVE} (?P<subject>myself|ourselves) {_OBJECT}",
        "positive",
        "state",
        "has",
    ),
    _rule(
        "bought_for_myself",
        rf"(?:i(?= .+ for myself$)|we(?= .+ for ourselves$)) {_GOT} {_OBJECT} "
        r"for (?P<subject>myself|ourselves)",
        "positive",
        "state",
        "has",
    ),
    # Version 3, appended like version 2's.
    _rule("used_to", rf"{_SUBJECT} used to {_VERB} {_OBJECT}", "negative", "update"),
    _rule(
        "not_am_anymore",
        rf"{_SUBJECT}{_BE} (?:not|no longer) {_ROLE}(?: {_LONGER})?",
        "negative",
        "update",
        "am",
    ),
    _rule("not_am", rf"{_SUBJECT}{_BE} not {_ROLE}", "negative", "state", "am"),
    _rule("am", rf"{_SUBJECT}{_BE} {_NOW}{_ROLE}", "positive", "state", "am"),
    _rule(
        "sold",
        rf"{_SUBJECT} (?:have |'ve )?(?:sold|got rid of|gave away) {_OBJECT}",
        "negative",
        "update",
        "owns",
    ),
)
_SINGULAR = frozenset({"i", "me", "my", "mine", "myself"})

# Within a sentence, ";" and line breaks end a statement too.
_STATEMENT = re.compile(r"[^;\n]+")
# "I like tea, and I have a dog", "We sold the car, now we cycle": clauses joined before
# a new first-person subject.
_CLAUSE_BREAK = re.compile(
    r"(?:,\s*|\s+)(?:and|but|so)\s+(?=(?:i|we|my|our)\b)"
    r"|,\s*(?=(?:now|then|and now)\s+(?:i|we|my|our)\b)",
    re.IGNORECASE,
)
_END_PUNCTUATION = ".!?\u2026"
# Words before a statement that say it changes something ("Actually, I'm a nurse").
_LEADING_CUE = re.compile(
    r"^(?:(?P<cue>actually|now|these days|nowadays)|so|well|oh|and|but|then)(?:,\s*|\s+)",
    re.IGNORECASE,
)
_UPDATE_TAIL = re.compile(r"\s(?:now|these days|nowadays)\s*$", re.IGNORECASE)
# "X instead of Y", "X, not Y": the object and what it replaces.
_REPLACES = re.compile(r"^(?P<new>.+?)(?:\s+instead of|,\s*not)\s+(?P<old>.+)$", re.IGNORECASE)
_LIST_END = re.compile(r"\s(?:and|or)\s", re.IGNORECASE)
_NEW_ATTRIBUTE = re.compile(r"^new\s+(?P<attribute>.+)$", re.IGNORECASE)
_CONDITION = re.compile(
    r"^(?P<condition>(?:only )?(?:if|when|whenever|unless)\b[^,]*),\s*(?P<rest>.+)$"
    r"|^(?P<rest2>.+?)\s+(?P<condition2>(?:only )?(?:if|when|whenever|unless)\b.+)$",
    re.IGNORECASE,
)
_HEDGES = re.compile(r"\b(?:maybe|perhaps|probably|might|may|possibly|i think)\b", re.IGNORECASE)
_LEADING_HEDGE = re.compile(
    r"^(?:maybe|perhaps|probably|possibly|i think|i guess)(?:,\s*|\s+)", re.IGNORECASE
)
_TRAILING = re.compile(
    r"(?:\s+(?:now|these days|nowadays|too|as well|anymore|any more|any longer|yesterday|today"
    r"|recently|lately|(?:last|this|next) (?:week|month|year|weekend|spring|summer|autumn"
    r"|fall|winter)|(?:a|an|\w+) (?:days?|weeks?|months?|years?) ago))+\s*$",
    re.IGNORECASE,
)
_LEADING = re.compile(r"^(?:(?:a|an|the|my|our|some)\s+)+", re.IGNORECASE)


class RuleClaimExtractor:
    """English first-person statements by fixed rules (see the module docstring)."""

    name = "oblivio.rules.en"
    #: 1: the I / my rules; 2: adds the mine / me / myself rules; 3: sentencex sentences,
    #: more verbs, "I am", "used to", "sold", "instead of", update cues (older plans keep
    #: the version that made them).
    version = 3

    def plan(self, message: Message) -> IngestionPlan:
        claims = [c for span in _sentences(message.text) if (c := _claim(message.text, *span))]
        return IngestionPlan(
            extractor=self.name,
            extractor_version=self.version,
            rules=tuple(r.name for r in RULES),
            # A plan holds a bounded number of claims: the first ones of a long message.
            claims=tuple(claims[:MAX_CLAIMS_PER_PLAN]),
        )


def _sentences(text: str) -> Iterator[tuple[int, int]]:
    """The spans of the statements of ``text``: its sentences (sentencex), split at ";",
    line breaks and clause joints, without surrounding space or final punctuation."""
    for first, last in sentence_spans(text):
        for statement in _STATEMENT.finditer(text, first, last):
            cut = statement.start()
            for joint in _CLAUSE_BREAK.finditer(text, statement.start(), statement.end()):
                yield from _trimmed(text, cut, joint.start())
                cut = joint.end()
            yield from _trimmed(text, cut, statement.end())


def sentence_spans(text: str) -> Iterator[tuple[int, int]]:
    """Where each sentence of ``text`` starts and ends, as sentencex finds them: its
    abbreviation lists and rules keep "jo.parker@example.com", "3.50", "9.30",
    "Dr." and "e.g." inside their sentence."""
    cursor = 0
    for sentence in sentencex.segment("en", text):
        found = text.find(sentence, cursor)
        if found < 0:  # the segmenter changed the text: keep what is left whole
            yield cursor, len(text)
            return
        yield found, found + len(sentence)
        cursor = found + len(sentence)


def _trimmed(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The span without surrounding white space and final punctuation, unless nothing
    is left."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and (text[end - 1].isspace() or text[end - 1] in _END_PUNCTUATION):
        end -= 1
    if start < end:
        yield start, end


def _claim(text: str, start: int, end: int) -> ClaimDraft | None:
    # Typographic apostrophes become plain ones: same length, so offsets hold.
    sentence = text[start:end].replace("’", "'")
    body, conditions = _split_condition(sentence)
    body = _LEADING_HEDGE.sub("", body)  # the hedge still makes the claim hypothetical
    body, cued = _strip_cues(body)
    for rule in RULES:
        match = rule.pattern.match(body)
        if match is None:
            continue
        span = _object_span(match)
        if span is None or span[1] - span[0] > MAX_OBJECT_CHARS:
            continue
        if len(match.groupdict().get("attribute") or "") > MAX_OBJECT_CHARS:
            continue
        groups = match.groupdict()
        predicate = rule.predicate or _VERB_PREDICATES[groups["verb"].lower()]
        old = groups.get("old")
        intent = rule.temporal_intent
        attribute = _clean(groups["attribute"]) if groups.get("attribute") else None
        if attribute and (renewed := _NEW_ATTRIBUTE.match(attribute)):
            attribute, intent = renewed["attribute"], "update"  # "my new number is …"
        thing = body[span[0] : span[1]]
        if rule.polarity == "positive" and old is None and (pair := _REPLACES.match(thing)):
            thing, old, intent = _clean(pair["new"]), pair["old"], "update"
        thing = _before_aside(thing)
        if rule.polarity == "positive" and (cued or _UPDATE_TAIL.search(match["object"])):
            intent = "update"
        if not thing:
            continue
        return ClaimDraft(
            subject="first_person"
            if groups["subject"].lower() in _SINGULAR
            else "first_person_plural",
            predicate=predicate,  # type: ignore[arg-type]
            attribute=attribute,
            object=thing,
            polarity=rule.polarity,  # type: ignore[arg-type]
            modality="hypothetical" if _HEDGES.search(sentence) else "asserted",
            temporal_intent=intent,  # type: ignore[arg-type]
            replaces_object=_clean(old) if old else None,
            conditions=conditions,
            memory_type="preference" if predicate == "likes" else "fact",
            evidence_start=start,
            evidence_end=end,
            rule=rule.name,
        )
    return None


def _before_aside(thing: str) -> str:
    """The object without an aside after a comma ("Utrecht, near the station"), unless the
    commas list things ("2 cats, a dog and a parrot")."""
    head, comma, tail = thing.partition(", ")
    if not comma or _LIST_END.search(tail):
        return thing
    return head


def _strip_cues(body: str) -> tuple[str, bool]:
    """The statement without leading discourse words, and whether one of them said that
    it changes something ("actually", "now", "these days")."""
    cued = False
    while match := _LEADING_CUE.match(body):
        cued = cued or match["cue"] is not None
        body = body[match.end() :]
    return body, cued


def _split_condition(sentence: str) -> tuple[str, tuple[str, ...]]:
    """The main clause and any condition clause ("if …", "when …", "unless …")."""
    match = _CONDITION.match(sentence)
    if match is None:
        return sentence, ()
    groups: dict[str, Any] = match.groupdict()
    if groups["condition"] is not None:
        return groups["rest"], (groups["condition"].strip(),)
    return groups["rest2"], (groups["condition2"].strip(),)


def _object_span(match: re.Match[str]) -> tuple[int, int] | None:
    """The object's span in the matched clause, without articles or trailing adverbs."""
    start, end = match.span("object")
    raw = match.string[start:end]
    trimmed = _TRAILING.sub("", raw).rstrip(" ,'\"")
    lead = _LEADING.match(trimmed)
    offset = lead.end() if lead else 0
    if offset >= len(trimmed):
        return None
    return start + offset, start + len(trimmed)


def _clean(text: str) -> str:
    return _LEADING.sub("", _TRAILING.sub("", text.strip())).strip()
