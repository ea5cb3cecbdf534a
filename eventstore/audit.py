"""The audit stream: a content-free system stream inside the same log.

Entries are typed so they cannot carry personal content: subjects appear only
as their pseudonymous subject reference, actors only as a keyed hash, and
everything else is counts, digests and identifiers of oblivio's own objects
(requests, certificates).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from eventstore.errors import InvalidInputError
from eventstore.ids import SYSTEM_NAMESPACE, check_namespace
from eventstore.model import NewEvent

AUDIT_NAMESPACE = SYSTEM_NAMESPACE
AUDIT_SUBJECT = "audit"
AUDIT_EVENT_PREFIX = "audit."

_ACTION = re.compile(r"[a-z][a-z0-9_.]{0,63}")
_HEX = re.compile(r"[0-9a-f]{1,128}")
_REF = re.compile(r"[A-Za-z0-9_.:/-]{1,128}")  # ids, and references such as letter ids


@dataclass(frozen=True)
class AuditEntry:
    """One thing that happened, without saying anything about anyone's content.

    ``namespace`` names the tenant it happened in; ``None`` for what concerns the
    whole store (key rotation, re-embedding, cluster-wide keys).
    """

    action: str
    subject_ref: str | None = None  # hex subject key, never the user id
    actor_ref: str | None = None  # hex keyed hash of the actor id
    object_refs: Mapping[str, str] = field(default_factory=dict)  # request/certificate ids
    counts: Mapping[str, int] = field(default_factory=dict)
    digests: Mapping[str, str] = field(default_factory=dict)  # hex digests
    namespace: str | None = None

    def to_event(self) -> NewEvent:
        self._validate()
        data: dict[str, Any] = {
            "action": self.action,
            "namespace": self.namespace,
            "subject_ref": self.subject_ref,
            "actor_ref": self.actor_ref,
            "object_refs": dict(self.object_refs),
            "counts": dict(self.counts),
            "digests": dict(self.digests),
        }
        return NewEvent(type=AUDIT_EVENT_PREFIX + self.action, data=data)

    def _validate(self) -> None:
        # Free text is not accepted anywhere: every field has a shape that
        # cannot hold a sentence about a person.
        if not _ACTION.fullmatch(self.action):
            raise InvalidInputError("audit action must be a lowercase dotted name")
        if self.namespace is not None:
            check_namespace(self.namespace)
        for name, value in (("subject_ref", self.subject_ref), ("actor_ref", self.actor_ref)):
            if value is not None and not _HEX.fullmatch(value):
                raise InvalidInputError(f"audit {name} must be a hex digest")
        for key, ref in self.object_refs.items():
            if not _ACTION.fullmatch(key) or not _REF.fullmatch(ref):
                raise InvalidInputError("audit object refs must be identifiers")
        for key, count in self.counts.items():
            if not _ACTION.fullmatch(key) or not isinstance(count, int) or isinstance(count, bool):
                raise InvalidInputError("audit counts must be integers")
        for key, digest in self.digests.items():
            if not _ACTION.fullmatch(key) or not _HEX.fullmatch(digest):
                raise InvalidInputError("audit digests must be hex")
