"""The bounded lexical rules that decide which earlier claim a correction names.

These are deliberately narrow (the corrections seed's rules, exactly): an
exact object, or a short whole-word phrase inside a short alphabetic object.
They are not semantic equivalence, and when more than one distinct earlier
object matches, nothing is retired.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

from projections.claims.plan import ClaimDraft

#: Predicates that say the same thing about an object share a class; only
#: claims of one class correct each other.
PREDICATE_CLASSES = {
    "uses": "use",
    "has": "have",
    "owns": "own",
    "likes": "like",
    "lives_in": "residence",
    "moved_to": "residence",
    "works_as": "occupation",
    "switched_to": "switch",
    "works_at": "workplace",
    "eats": "eat",
    "drinks": "drink",
    "drives": "drive",
    "am": "identity",
}
#: The one bounded transition across classes: a switch replaces what one used
#: (FACT claims only), never what one has, owns or likes.
TRANSITIONS = {"switch": ("use",)}
TRANSITION_MEMORY_TYPES = frozenset({"fact"})

MAX_SHORT_TARGET_WORDS = 3
MAX_SHORTENED_OBJECT_WORDS = 4
MIN_SHORT_WORD_CHARS = 3

_LEADING = re.compile(r"^(?:(?:a|an|the|my|our|some)\s+)+", re.IGNORECASE)
_SPACES = re.compile(r"\s+")
_EDGES = re.compile(r"^[\s\"'“”‘’(]+|[\s\"'“”‘’).,;:!?]+$")


def predicate_class(predicate: str, attribute: str | None) -> str:
    if predicate == "is":
        return f"attribute:{normalise(attribute or '')}"
    return PREDICATE_CLASSES[predicate]


def target_classes(claim: ClaimDraft) -> list[str]:
    """The classes whose claims ``claim`` may retire."""
    return classes_retired_by(claim.predicate, claim.attribute, claim.memory_type)


def classes_retired_by(predicate: str, attribute: str | None, memory_type: str) -> list[str]:
    """The classes whose claims a correction of this predicate and memory type may retire."""
    own = predicate_class(predicate, attribute)
    extra = TRANSITIONS.get(own, ()) if memory_type in TRANSITION_MEMORY_TYPES else ()
    return [own, *extra]


def normalise(text: str) -> str:
    """Case-folded, single-spaced, without edge punctuation or a leading article."""
    text = _EDGES.sub("", _SPACES.sub(" ", text.strip()))
    return _LEADING.sub("", text).casefold()


def target_matches(target: str, prior_object: str) -> bool:
    """Whether ``target`` names ``prior_object``: exactly, or as a short phrase in it.

    A shortened target is one to three whole words, each of at least three
    letters, found contiguously inside an alphabetic object of at most four
    words; numbers and partial words are never shortened.
    """
    wanted, prior = normalise(target), normalise(prior_object)
    if not wanted or not prior:
        return False
    if wanted == prior:
        return True
    words, prior_words = wanted.split(" "), prior.split(" ")
    if not (
        len(words) <= MAX_SHORT_TARGET_WORDS
        and len(prior_words) <= MAX_SHORTENED_OBJECT_WORDS
        and all(w.isalpha() for w in prior_words)
        and all(w.isalpha() and len(w) >= MIN_SHORT_WORD_CHARS for w in words)
    ):
        return False
    return any(
        prior_words[i : i + len(words)] == words for i in range(len(prior_words) - len(words) + 1)
    )


def distinct_objects(objects: Iterable[str]) -> Collection[str]:
    return {normalise(o) for o in objects}
