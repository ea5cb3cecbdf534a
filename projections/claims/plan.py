"""Ingestion plans: what a claim extractor says one message claims.

A plan is data, saved in the log with the claims derived from it, so replay
and rebuild read the saved plan and never run an extractor again.  It names
the extractor, its version and rule set, and carries a checksum over its
canonical JSON; a record of an older plan version keeps all of that.  The
schema below is also what an extractor's raw output is validated against
before anything is written (see :func:`validate_plan`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eventstore.errors import InvalidInputError

#: oblivio's own plan format; PRME's speech_act numbering does not apply.
PLAN_VERSION = 1
MAX_CLAIMS_PER_PLAN = 50
MAX_OBJECT_CHARS = 200

Predicate = Literal[
    "uses",
    "has",
    "owns",
    "likes",
    "lives_in",
    "works_as",
    "moved_to",
    "switched_to",
    "is",
    # Since the rule extractor's version 3.
    "works_at",
    "eats",
    "drinks",
    "drives",
    "am",
]
SubjectRef = Literal["first_person", "first_person_plural"]


class InvalidPlanError(InvalidInputError):
    """The extractor's output is not a valid ingestion plan for this message."""


class ClaimDraft(BaseModel):
    """One claim of a message, before its subject is resolved."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subject: SubjectRef
    predicate: Predicate
    #: What "my X is Y" says X is; only with the ``is`` predicate.
    attribute: str | None = Field(default=None, max_length=MAX_OBJECT_CHARS)
    object: str = Field(min_length=1, max_length=MAX_OBJECT_CHARS)
    polarity: Literal["positive", "negative"]
    modality: Literal["asserted", "observed", "hypothetical", "reported"]
    temporal_intent: Literal["state", "update", "past"]
    replaces_object: str | None = Field(default=None, max_length=MAX_OBJECT_CHARS)
    conditions: tuple[str, ...] = Field(default=(), max_length=5)
    memory_type: Literal["fact", "preference"]
    #: The evidence span: ``message[evidence_start:evidence_end]``.
    evidence_start: int = Field(ge=0)
    evidence_end: int = Field(gt=0)
    rule: str = Field(min_length=1, max_length=64)


class IngestionPlan(BaseModel):
    """The claims of one message, and what produced them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    plan_version: int = PLAN_VERSION
    extractor: str = Field(min_length=1, max_length=100)
    extractor_version: int = Field(ge=1)
    rules: tuple[str, ...]
    claims: tuple[ClaimDraft, ...] = Field(default=(), max_length=MAX_CLAIMS_PER_PLAN)
    #: Why an extractor produced no usable plan (its output was rejected).
    failure: str | None = None

    def body(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def checksum(self) -> str:
        text = json.dumps(self.body(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    def saved(self) -> dict[str, Any]:
        """The plan as the log keeps it: its body and checksum."""
        return {**self.body(), "checksum": self.checksum()}


class Message(BaseModel):
    """What an extractor is given: the text and who said it."""

    model_config = ConfigDict(frozen=True)

    text: str
    role: str
    speaker: str | None = None


class ClaimExtractor(Protocol):
    """Turns one message into an ingestion plan.

    Separate from :class:`projections.extraction.Extractor` (which derives
    the nodes of ``store()``): claims come only from ``ingest()``, through the
    extraction worker, and the plan it returns is saved, not recomputed.
    """

    name: str
    version: int

    def plan(self, message: Message) -> IngestionPlan: ...


def validate_plan(raw: Any, message: Message) -> IngestionPlan:
    """Parse ``raw`` (JSON text or decoded JSON) as a plan grounded in ``message``.

    Beyond the schema, every claim must be grounded: its evidence span lies in
    the message, its object occurs in that span, and a ``replaces_object`` is
    named in the message itself.
    """
    try:
        plan = (
            IngestionPlan.model_validate_json(raw)
            if isinstance(raw, str | bytes)
            else IngestionPlan.model_validate(raw)
        )
    except ValidationError as e:
        raise InvalidPlanError(f"not an ingestion plan: {e.error_count()} schema errors") from e
    for claim in plan.claims:
        _check_grounded(claim, message.text)
    return plan


def _check_grounded(claim: ClaimDraft, text: str) -> None:
    if not claim.evidence_start < claim.evidence_end <= len(text):
        raise InvalidPlanError("a claim's evidence span lies outside the message")
    evidence = text[claim.evidence_start : claim.evidence_end].casefold()
    if claim.object.casefold() not in evidence:
        raise InvalidPlanError("a claim's object does not occur in its evidence")
    if (
        claim.replaces_object is not None
        and claim.replaces_object.casefold() not in text.casefold()
    ):
        raise InvalidPlanError("a claim's replaces_object is not named in the message")
    if (claim.predicate == "is") != (claim.attribute is not None):
        raise InvalidPlanError("an attribute goes with the 'is' predicate, and only with it")
