"""Keyed JSON documents kept as oblivio memories: the mapping a key-value store needs.

A document lives at a namespace (a tuple of strings) and a key.  One namespace
segment names the person (the data subject, so that ``forget`` erases all of
their documents); every other segment, the key and the value are personal data
too and travel only inside the subject's encrypted memory events, as metadata:

- ``doc.locator`` — a keyed hash of (namespace, key), HMAC-SHA256 keyed with the
  subject's pseudonymous reference: the document's identity across revisions,
  and the key of the oblivio *item* it is (``MemoryClient.put_item``);
- ``doc.namespace`` / ``doc.key`` / ``doc.value`` — JSON, needed to read it back;
- ``doc.indexed`` and ``doc.ttl`` (the TTL in minutes, if any; the expiry
  itself is the item's retention time).

A document is an item: writing it again stores a new revision whose node
supersedes the previous revision's, and oblivio finds the current revision by
a keyed hash of the locator (under the subject's data key) without reading the
subject's other memories.  Nothing here imports a framework.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from oblivio import Scope, StoredItem
from oblivio.errors import InvalidInputError
from oblivio.integrations.clients import Client

LOCATOR = "doc.locator"
NAMESPACE = "doc.namespace"
KEY = "doc.key"
VALUE = "doc.value"
INDEXED = "doc.indexed"
TTL = "doc.ttl"


#: A template segment that names the person: one placeholder in braces, as LangMem
#: writes its namespaces (``("memories", "{langgraph_user_id}")``).
_PLACEHOLDER = re.compile(r"\{[^{}]+\}")


@dataclass(frozen=True)
class DocumentMapping:
    """Which namespace segment is the person, and which oblivio scope documents get.

    ``user_segment`` is the index of the segment naming the person.  A mapping
    built from a template (:meth:`from_template`) also pins the template's other
    segments: a namespace whose segment differs from them is not this store's.
    ``scope_segment`` (when set) names a segment whose value is the scope
    (``personal``, ``session``, ``project``, ``organisation``); otherwise every
    document gets ``scope``.
    """

    user_segment: int
    scope: Scope = Scope.PERSONAL
    scope_segment: int | None = None
    #: The template the mapping was built from, if any (its literal segments are pinned).
    template: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        for what, index in (
            ("user_segment", self.user_segment),
            ("scope_segment", self.scope_segment),
        ):
            if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
                raise InvalidInputError(f"{what} must be a non-negative integer")
            if index is not None and index < 0:
                raise InvalidInputError(f"{what} must be a non-negative integer")
        if self.scope_segment is not None and self.scope_segment == self.user_segment:
            raise InvalidInputError("the user segment cannot also be the scope segment")

    @classmethod
    def from_template(
        cls,
        template: Sequence[str],
        scope: Scope = Scope.PERSONAL,
        scope_segment: int | None = None,
    ) -> DocumentMapping:
        """The mapping a namespace template such as ``("memories", "{user_id}")`` states:
        its one placeholder segment is the person, its other segments are fixed."""
        if isinstance(template, str) or not all(isinstance(s, str) for s in template):
            raise InvalidInputError("a namespace template is a tuple of strings")
        placeholders = [i for i, s in enumerate(template) if _PLACEHOLDER.fullmatch(s)]
        if len(placeholders) != 1:
            raise InvalidInputError(
                f"namespace template {tuple(template)!r} must name the person with exactly "
                'one placeholder segment, such as ("memories", "{user_id}")'
            )
        literals = [s for i, s in enumerate(template) if i != placeholders[0]]
        if any("{" in s or "}" in s or not s for s in literals):
            raise InvalidInputError(
                f"namespace template {tuple(template)!r}: every other segment is fixed text, "
                "without braces"
            )
        return cls(placeholders[0], scope, scope_segment, tuple(template))

    @property
    def depth(self) -> int:
        """The shortest namespace this mapping can place."""
        return max(1 + max(self.user_segment, self.scope_segment or 0), len(self.template or ()))

    def subject(self, namespace: Sequence[str]) -> str:
        """The person a namespace belongs to."""
        if len(namespace) < self.depth:
            raise InvalidInputError(
                f"namespace {tuple(namespace)!r} has no segment {self.depth - 1} "
                f"(the store maps {self._described()})"
            )
        if not self._fits(namespace):
            raise InvalidInputError(
                f"namespace {tuple(namespace)!r} does not fit the store's template "
                f"{self.template!r}"
            )
        return namespace[self.user_segment]

    def _described(self) -> str:
        if self.template is not None:
            return f"namespaces by the template {self.template!r}"
        return f"segment {self.user_segment} to the user"

    def _fits(self, namespace: Sequence[str]) -> bool:
        pinned = self.template or ()
        return all(
            i == self.user_segment or namespace[i] == fixed for i, fixed in enumerate(pinned)
        )

    def scope_of(self, namespace: Sequence[str]) -> Scope:
        if self.scope_segment is None:
            return self.scope
        return scope(namespace[self.scope_segment], "segment")

    def fixed_subject(self, prefix: Sequence[str]) -> str | None:
        """The person a namespace prefix (or pattern) pins, if it pins one."""
        if len(prefix) <= self.user_segment or prefix[self.user_segment] == "*":
            return None
        return prefix[self.user_segment]


def scope(value: Scope | str, what: str = "scope") -> Scope:
    """An oblivio scope from its name, or a clear error naming the allowed ones."""
    try:
        return Scope(value)
    except ValueError as e:
        allowed = ", ".join(s.value for s in Scope)
        raise InvalidInputError(f"{what} {value!r} is not a scope ({allowed})") from e


@dataclass(frozen=True)
class Document:
    """The latest revision of one document, as its owner may read it."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    indexed: bool
    expires_at: datetime | None
    #: The TTL in minutes (a read that refreshes it moves ``expires_at``), if any.
    ttl: float | None
    #: Every readable revision's event, in effective order; the last is the current one.
    event_ids: tuple[uuid.UUID, ...]

    @property
    def event_id(self) -> uuid.UUID:
        return self.event_ids[-1]

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now


def locator(subject_ref: str, namespace: Sequence[str], key: str) -> str:
    """The keyed hash that identifies (namespace, key) inside one subject's events."""
    message = json.dumps([list(namespace), key], ensure_ascii=False, separators=(",", ":"))
    return hmac.new(bytes.fromhex(subject_ref), message.encode(), hashlib.sha256).hexdigest()


def check_value(value: object) -> dict[str, Any]:
    """A document value: a JSON object with string keys (finite numbers only)."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InvalidInputError("a document value must be a JSON object with string keys")
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidInputError(f"a document value must be JSON-serialisable: {e}") from e
    decoded: dict[str, Any] = json.loads(text)
    return decoded


def value_text(value: object) -> list[str]:
    """Every string a JSON value holds, in order (object keys are names, not text)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [text for item in value.values() for text in value_text(item)]
    if isinstance(value, list | tuple):
        return [text for item in value for text in value_text(item)]
    return []


def document_meta(
    ref: str,
    namespace: Sequence[str],
    key: str,
    value: Mapping[str, Any],
    *,
    indexed: bool,
    ttl: float | None,
) -> dict[str, Any]:
    """The metadata of one revision (encrypted with the subject's key, like all metadata)."""
    return {
        LOCATOR: locator(ref, namespace, key),
        NAMESPACE: _namespace_text(namespace),
        KEY: key,
        VALUE: json.dumps(value, ensure_ascii=False, sort_keys=True),
        INDEXED: indexed,
        TTL: ttl,
    }


def is_document(meta: Mapping[str, Any]) -> bool:
    return isinstance(meta.get(LOCATOR), str)


def read_documents(
    client: Client, user: str, locators: Sequence[str] | None = None
) -> dict[str, Document]:
    """Every document of ``user`` by locator (a listing: it reads each current revision),
    or those at ``locators`` only (found by index)."""
    found = (_document(item) for item in client.list_items(user_id=user, keys=locators))
    return {doc_locator: doc for doc_locator, doc in found if doc is not None}


def read_document(client: Client, user: str, doc_locator: str) -> Document | None:
    """The document at ``doc_locator``, found by index (its cost does not grow with the
    person's other memories)."""
    item = client.get_item(doc_locator, user_id=user)
    return None if item is None else _document(item)[1]


def _document(item: StoredItem) -> tuple[str, Document | None]:
    meta = item.current.meta
    if not is_document(meta):
        return item.key, None  # an item stored by other means
    ttl = meta.get(TTL)
    return item.key, Document(
        namespace=tuple(json.loads(meta[NAMESPACE])),
        key=meta[KEY],
        value=json.loads(meta[VALUE]),
        created_at=item.created_at,
        updated_at=item.current.recorded_at,
        indexed=bool(meta.get(INDEXED, True)),
        expires_at=item.expires_at,
        ttl=None if ttl is None else float(ttl),
        event_ids=item.revision_ids,
    )


def _namespace_text(namespace: Sequence[str]) -> str:
    return json.dumps(list(namespace), ensure_ascii=False)


def namespace_condition(prefix: Sequence[str]) -> dict[str, Any] | None:
    """The retrieval ``meta`` filter that keeps the nodes of documents under
    ``prefix``'s leading fixed segments (a wildcard and what follows it are left to
    :func:`namespace_matches`); None when ``prefix`` starts with a wildcard.

    The namespace is kept as the text of a JSON list, so a namespace under
    ``fixed`` is written as ``fixed``'s text without its closing bracket, then more:
    the closing quote of the last segment keeps ``("a", "b")`` from matching
    ``("a", "bc")``.
    """
    fixed: list[str] = []
    for segment in prefix:
        if segment == "*":
            break
        fixed.append(segment)
    if not fixed:
        return None
    return {NAMESPACE: {"$prefix": _namespace_text(fixed)[:-1]}}


def node_address(meta: Mapping[str, Any]) -> tuple[tuple[str, ...], str]:
    """Namespace and key of the document a retrieved node derives from (a node's
    metadata is its event's)."""
    return tuple(json.loads(meta[NAMESPACE])), str(meta[KEY])


# -- matching ---------------------------------------------------------------------------


def namespace_matches(namespace: Sequence[str], pattern: Sequence[str], *, suffix: bool) -> bool:
    """Prefix (or suffix) match where ``*`` stands for any one segment."""
    if len(namespace) < len(pattern):
        return False
    if suffix:
        namespace, pattern = namespace[::-1], pattern[::-1]
    return all(p == "*" or n == p for n, p in zip(namespace, pattern, strict=False))


def filter_matches(value: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    """LangGraph's filter semantics: exact (nested) values or ``$eq/$ne/$gt/$gte/$lt/$lte``."""
    if not wanted:
        return True
    return all(_compare(value.get(k), v) for k, v in wanted.items())


def _compare(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(actual, op, operand) for op, operand in wanted.items())
        return isinstance(actual, Mapping) and all(
            _compare(actual.get(k), v) for k, v in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(wanted)
            and all(_compare(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return bool(actual == wanted)


_ORDERINGS = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def _operator(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(actual == operand)
    if op == "$ne":
        return bool(actual != operand)
    if op not in _ORDERINGS:
        raise InvalidInputError(f"unsupported filter operator {op!r}")
    numbers = _number(actual), _number(operand)
    if numbers[0] is None or numbers[1] is None:
        return False
    return bool(_ORDERINGS[op](*numbers))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)  # infinities compare as in Python; NaN matches nothing
    except (ValueError, OverflowError):
        return None
