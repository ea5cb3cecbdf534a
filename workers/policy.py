"""The vocabularies and time limits of erasure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Final, Literal, get_args

from eventstore.errors import InvalidInputError

#: GDPR grounds an erasure can rest on: Art. 17(1)(a)–(f), and storage
#: limitation (Art. 5(1)(e)) for retention sweeps.
LEGAL_GROUNDS: Final = {
    "art17-1-a": "personal data no longer necessary for the purposes",
    "art17-1-b": "consent withdrawn",
    "art17-1-c": "objection to processing",
    "art17-1-d": "unlawfully processed",
    "art17-1-e": "erasure required by a legal obligation",
    "art17-1-f": "data of a child collected for information society services",
    "art5-1-e": "storage limitation (retention period expired)",
}

#: Why the erasure was asked for.  Users may only give ``user_request``;
#: operators may record any of these.  As a type, so schemas can enumerate it.
ReasonName = Literal[
    "user_request", "ttl_expired", "correction", "operator_request", "legal_obligation"
]
REASONS: Final = frozenset(get_args(ReasonName))
#: The keys of ``LEGAL_GROUNDS``, as a type.
LegalGroundName = Literal[
    "art17-1-a", "art17-1-b", "art17-1-c", "art17-1-d", "art17-1-e", "art17-1-f", "art5-1-e"
]

DEFAULT_LEGAL_GROUND: Final = "art17-1-b"
RETENTION_LEGAL_GROUND: Final = "art5-1-e"


def check_legal_ground(value: object) -> str:
    if not isinstance(value, str) or value not in LEGAL_GROUNDS:
        raise InvalidInputError(
            "unsupported legal ground; use one of: " + ", ".join(sorted(LEGAL_GROUNDS))
        )
    return value


def check_reason(value: object) -> str:
    if not isinstance(value, str) or value not in REASONS:
        raise InvalidInputError("unsupported reason; use one of: " + ", ".join(sorted(REASONS)))
    return value


@dataclass(frozen=True)
class ErasurePolicy:
    """Deadlines, retries and leases of erasure work."""

    # Art. 12(3) allows one month; oblivio holds itself to 72 hours by default.
    deadline: timedelta = timedelta(hours=72)
    max_attempts: int = 5
    # A worker renews its lease every third of it while it works (heartbeat), so
    # the lease bounds how long a *dead* worker's job waits to be taken over
    # (about 10.5 s with the 0.5 s poll), not how long a job may take.
    lease: timedelta = timedelta(seconds=10)
    backoff_base: timedelta = timedelta(seconds=2)
    backoff_cap: timedelta = timedelta(minutes=10)

    @property
    def heartbeat(self) -> timedelta:
        """How often a working worker renews its lease: three beats may fail before it lapses."""
        return self.lease / 3

    def backoff(self, attempts: int) -> timedelta:
        """Exponential backoff: base · 2^(attempts-1), capped."""
        delay: timedelta = self.backoff_base * (2 ** max(attempts - 1, 0))
        return min(delay, self.backoff_cap)


@dataclass(frozen=True)
class KeyPolicy:
    """KEK rotation: every ``rotate_every``, and an old version is retired
    ``retire_after`` later; after that no residual wrapped key can be unwrapped."""

    rotate_every: timedelta = timedelta(days=30)
    retire_after: timedelta = timedelta(days=30)
