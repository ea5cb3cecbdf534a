"""Each facade operation as an HTTP call: the request it makes and how its answer decodes.

A :class:`Call` names the facade operation it stands for (``oblivio.memory``):
the remote client takes that operation's signature, defaults and docstring,
binds the caller's arguments to it, and hands them to the call's ``request``
builder.  Answers decode with pydantic into the facade's own result types
(``Node``, ``Retrieval``, ``ErasureStatus``, …), so a remote result compares
equal to an embedded one.

Arguments the server decides for itself are refused here, before anything is
sent, rather than silently dropped: over HTTP the API key is the actor of an
erasure and a forget is recorded as ``user_request`` (docs/http.md).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

from eventstore.errors import InvalidEncodingError, InvalidInputError
from eventstore.ids import parse_uuid
from oblivio.memory import commands, compliance, inputs, items, queries, updates
from oblivio.memory import ingest as ingestion
from oblivio.memory.context import MemoryContext
from oblivio.memory.ingest import IngestedMessage
from oblivio.memory.records import (
    Correction,
    EmbedderInfo,
    ItemRevision,
    MemoryEvent,
    NodePage,
    Rejection,
    Retrieval,
    StoredItem,
    StoredMemory,
)
from oblivio.remote.transport import Request
from projections.model import AssertionState, Node
from workers.erasure import ErasureStatus

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
#: The caller's arguments by name, defaults applied (``inspect.BoundArguments.arguments``).
Arguments = dict[str, Any]
#: The longest wait for an erasure the server grants (``wait_seconds``, docs/http.md).
MAX_WAIT_SECONDS = 60.0


@dataclass(frozen=True)
class Call(Generic[P, R]):
    """A facade operation over HTTP.

    ``missing`` is what a 404 answer stands for, where the facade returns a
    value for "not available" (``None``, an empty list); otherwise a 404 raises
    like any error.  ``cached`` answers never change for the same arguments
    and the client keeps them.
    """

    operation: Callable[Concatenate[MemoryContext, P], R]
    request: Callable[[Arguments], Request]
    decode: Callable[[httpx.Response], R]
    missing: Callable[[], R] | None = None
    cached: bool = False


# -- encoding arguments ------------------------------------------------------------------


def _json(value: Any) -> Any:
    """UUIDs, times and enumerations as their JSON text, mappings as objects, and
    ``bytes`` (which the facade takes for text) as the UTF-8 text they must be."""
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidEncodingError("text is not valid UTF-8") from e
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    return to_jsonable_python(value)


def _members(values: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON body; a member left at ``None`` is left out (its default on the server)."""
    return {name: _json(value) for name, value in values.items() if value is not None}


def _sent(method: str, path: str, *, retry_safe: bool = False) -> Callable[[Arguments], Request]:
    """A request whose body holds the arguments under the operation's own names (the
    routes name their members after the facade's parameters).  ``retry_safe`` marks a
    call that is safe to repeat; one with a ``request_id`` is safe when it carries one."""

    def request(args: Arguments) -> Request:
        keyed = args.get("request_id") is not None
        return Request(method, path, body=_members(args), retry_safe=retry_safe or keyed)

    return request


def _segment(value: Any) -> str:
    """One path segment; a user id with ``/`` cannot name a path segment (docs/remote.md)."""
    return quote(str(value), safe="")


def _user_path(args: Arguments, operation: str) -> str:
    user = args["user_id"]
    if user is None:
        raise InvalidInputError(f"{operation} over HTTP needs the user_id its route names")
    return f"/v1/compliance/users/{_segment(inputs.user(user))}"


def _server_decides(args: Arguments, operation: str, reason: str | None = None) -> None:
    if args["actor_id"] is not None:
        raise InvalidInputError(f"over HTTP the API key is the actor of {operation}")
    if reason is not None and args["reason"] != reason:
        raise InvalidInputError(f"over HTTP {operation} is always recorded as {reason}")


def _wait_seconds(args: Arguments) -> float:
    return min(float(args["timeout"]), MAX_WAIT_SECONDS) if args["wait"] else 0.0


# -- decoding answers -----------------------------------------------------------------------


def _as(result_type: Any) -> Callable[[httpx.Response], Any]:
    """A decoder of JSON answers into ``result_type`` (a dataclass, a list of them, …)."""
    adapter: TypeAdapter[Any] = TypeAdapter(result_type)
    return lambda response: adapter.validate_python(response.json())


def _member(name: str, result_type: Any) -> Callable[[httpx.Response], Any]:
    adapter: TypeAdapter[Any] = TypeAdapter(result_type)
    return lambda response: adapter.validate_python(response.json()[name])


def _nothing(response: httpx.Response) -> None:
    return None


def _first(decode: Callable[[httpx.Response], list[T]]) -> Callable[[httpx.Response], T]:
    return lambda response: decode(response)[0]


def _node_page(response: httpx.Response) -> NodePage:
    page = response.json()
    return _NODE_PAGE.validate_python({"nodes": page["nodes"], "next_cursor": page["next_after"]})


_NODE_PAGE: TypeAdapter[NodePage] = TypeAdapter(NodePage)
_corrections = _as(list[Correction])


# -- memory commands ------------------------------------------------------------------------


def _batch(path: str, member: str) -> Callable[[Arguments], Request]:
    """A batch write, safe to repeat when every entry of ``member`` carries a request id."""

    def request(args: Arguments) -> Request:
        body = _members(args)
        entries = body.get(member)
        keyed = isinstance(entries, list) and all(
            isinstance(e, dict) and e.get("request_id") is not None for e in entries
        )
        return Request("POST", path, body=body, retry_safe=keyed)

    return request


def _supersede_many(args: Arguments) -> Request:
    entries = [_correction_entry(entry) for entry in args["corrections"]]
    body = _members({**args, "corrections": entries})
    return Request("POST", "/v1/supersedences", body=body, retry_safe=True)


def _correction_entry(entry: Any) -> Any:
    """A correction as ``commands.supersede_many`` takes it: a mapping or a 2-3 tuple."""
    if isinstance(entry, Mapping):
        return entry
    if isinstance(entry, Sequence) and not isinstance(entry, str) and len(entry) in (2, 3):
        old, new, evidence = (*entry, None)[:3]
        return {"old_node_id": old, "new_node_id": new, "evidence_id": evidence}
    raise InvalidInputError("a correction is (old_node_id, new_node_id[, evidence_id])")


def _reinforce(args: Arguments) -> Request:
    node = inputs.node_id(args["node_id"])
    key = args["request_id"]
    return Request(
        "PUT",
        f"/v1/nodes/{node}/reinforce",
        params={"user_id": args["user_id"]},
        body=_members({"evidence_id": args["evidence_id"]}),
        headers={} if key is None else {"Idempotency-Key": str(key)},
        retry_safe=key is not None,
    )


def _remove_trigger(args: Arguments) -> Request:
    trigger = parse_uuid(args["trigger_id"], "trigger id")
    params = {"user_id": args["user_id"]}
    return Request("DELETE", f"/v1/triggers/{trigger}", params=params, retry_safe=True)


def _clear_attractors(args: Arguments) -> Request:
    return Request("DELETE", "/v1/attractors", params={"user_id": args["user_id"]}, retry_safe=True)


# -- keyed items ----------------------------------------------------------------------------


def _put_item(args: Arguments) -> Request:
    path = f"/v1/items/{_item_key(args['key'])}"
    body = _members({k: v for k, v in args.items() if k != "key"})
    # Not retried: each put is a new revision.
    return Request("PUT", path, body=body)


def _item_key(key: Any) -> str:
    return quote(items.item_key(key), safe="")


def _expiries(user_id: Any, expiries: Any) -> Request:
    if not isinstance(expiries, Mapping):
        raise InvalidInputError("expiries must map item keys to datetimes or None")
    body = {"user_id": user_id, "expiries": _json(expiries)}
    return Request("PATCH", "/v1/items", body=body, retry_safe=True)


def _get_item(args: Arguments) -> Request:
    path = f"/v1/items/{_item_key(args['key'])}"
    return Request("GET", path, params={"user_id": args["user_id"]}, retry_safe=True)


def _keys(response: httpx.Response) -> set[str]:
    return set(response.json()["keys"])


# -- queries --------------------------------------------------------------------------------


def _read(path: str, **params: Any) -> Request:
    return Request("GET", path, params={k: _json(v) for k, v in params.items()}, retry_safe=True)


def _event_path(args: Arguments) -> str:
    return f"/v1/events/{parse_uuid(args['event_id'], 'event id')}"


def _node_path(args: Arguments) -> str:
    return f"/v1/nodes/{parse_uuid(args['node_id'], 'node id')}"


def _likely_update_decision(args: Arguments, verb: str) -> Request:
    body = {"user_id": args["user_id"], "actor_id": args["actor_id"]}
    return Request("POST", f"{_node_path(args)}/likely-update/{verb}", body=body)


# -- compliance -----------------------------------------------------------------------------


def _delete_event(args: Arguments) -> Request:
    _server_decides(args, "delete_event")
    event = parse_uuid(args["event_id"], "event id")
    params = {
        "reason": args["reason"],
        "legal_ground": args["legal_ground"],
        "wait_seconds": _wait_seconds(args),
    }
    path = f"{_user_path(args, 'delete_event')}/memory/{event}"
    return Request("DELETE", path, params=params, retry_safe=True)


def _forget(args: Arguments) -> Request:
    _server_decides(args, "forget", reason="user_request")
    body = {"legal_ground": args["legal_ground"], "wait_seconds": _wait_seconds(args)}
    path = f"{_user_path(args, 'forget')}/forget"
    # Forgetting again answers with the earlier request.
    return Request("POST", path, body=body, retry_safe=True)


def _export_audit(args: Arguments) -> Request:
    return _read("/v1/compliance/audit/export", since=args["since"], until=args["until"])


def _text_answer(response: httpx.Response) -> str:
    return response.text


# -- the table ------------------------------------------------------------------------------

_erasure = _as(ErasureStatus)

store = Call(commands.store, _sent("POST", "/v1/events"), _member("event_id", uuid.UUID))
ingest = Call(
    ingestion.ingest, _sent("POST", "/v1/ingest"), _first(_member("results", list[IngestedMessage]))
)
store_many = Call(
    commands.store_many,
    _batch("/v1/events:batch", "memories"),
    _member("results", list[StoredMemory]),
)
ingest_batch = Call(
    ingestion.ingest_batch,
    _batch("/v1/ingest", "messages"),
    _member("results", list[IngestedMessage]),
)
# Corrections: an exact repeat is a no-op the server answers as replayed.
supersede = Call(
    commands.supersede, _sent("POST", "/v1/supersedences", retry_safe=True), _first(_corrections)
)
supersede_many = Call(commands.supersede_many, _supersede_many, _corrections)
contradict = Call(
    commands.contradict, _sent("POST", "/v1/contradictions", retry_safe=True), _as(Correction)
)
resolve_contradiction = Call(
    commands.resolve_contradiction,
    _sent("POST", "/v1/contradictions/resolutions", retry_safe=True),
    _as(Correction),
)
confirm_likely_update = Call(
    updates.confirm_likely_update,
    lambda a: _likely_update_decision(a, "confirm"),
    _as(Correction),
)
reject_likely_update = Call(
    updates.reject_likely_update,
    lambda a: _likely_update_decision(a, "reject"),
    _as(Rejection),
)
reinforce = Call(commands.reinforce, _reinforce, _as(Node))
add_resonance_trigger = Call(
    commands.add_resonance_trigger, _sent("POST", "/v1/triggers"), _member("id", uuid.UUID)
)
remove_resonance_trigger = Call(commands.remove_resonance_trigger, _remove_trigger, _nothing)
add_negative_attractor = Call(
    commands.add_negative_attractor, _sent("POST", "/v1/attractors"), _member("id", uuid.UUID)
)
clear_negative_attractors = Call(commands.clear_negative_attractors, _clear_attractors, _nothing)
put_item = Call(items.put_item, _put_item, _as(ItemRevision))
set_item_expiry = Call(
    items.set_item_expiry,
    lambda a: _expiries(a["user_id"], {a["key"]: a["expires_at"]}),
    lambda response: bool(_keys(response)),
)
set_item_expiries = Call(
    items.set_item_expiries, lambda a: _expiries(a["user_id"], a["expiries"]), _keys
)
get_item = Call(items.get_item, _get_item, _as(StoredItem), missing=lambda: None)


def _list_items(args: Arguments) -> Request:
    keys = args.get("keys")
    if keys is not None and len(keys) == 0:
        # No ``key`` parameter would list every item: refused like the facade refuses it.
        raise InvalidInputError("keys must name at least one item key")
    return _read("/v1/items", user_id=args["user_id"], key=keys)


list_items = Call(items.list_items, _list_items, _as(list[StoredItem]))
get_event = Call(
    queries.get_event,
    lambda a: _read(_event_path(a), user_id=a["user_id"]),
    _as(MemoryEvent),
    missing=lambda: None,
)
get_events = Call(queries.get_events, lambda a: _read("/v1/events", **a), _as(list[MemoryEvent]))


def _list_nodes(args: Arguments) -> Request:
    # The meta filter travels as key=JSON value conditions (``meta=topic="home"``).
    meta = inputs.meta_filter(args["meta"])
    conditions = (
        None
        if meta is None
        else [f"{k}={json.dumps(v)}" for k, v in inputs.meta_filter_json(meta).items()]
    )
    return _read("/v1/nodes", **{**args, "meta": conditions})


list_nodes = Call(queries.list_nodes, _list_nodes, _node_page)
get_event_nodes = Call(
    queries.get_event_nodes,
    lambda a: _read(f"{_event_path(a)}/nodes", user_id=a["user_id"]),
    _as(list[Node]),
    missing=list,
)
get_node = Call(
    queries.get_node,
    lambda a: _read(_node_path(a), **{k: v for k, v in a.items() if k != "node_id"}),
    _as(Node),
    missing=lambda: None,
)
get_assertion_state = Call(
    queries.get_assertion_state,
    lambda a: _read(f"{_node_path(a)}/assertion-state", user_id=a["user_id"], as_of=a["as_of"]),
    _as(AssertionState),
    missing=lambda: None,
)
# A read: repeating it only counts the returned nodes' accesses again.
retrieve = Call(queries.retrieve, _sent("POST", "/v1/retrieve", retry_safe=True), _as(Retrieval))
negative_attractor_count = Call(
    queries.negative_attractor_count,
    lambda a: _read("/v1/attractors/count", user_id=a["user_id"]),
    _member("count", int),
)
subjects = Call(queries.subjects, lambda a: _read("/v1/subjects"), _member("user_ids", list[str]))
subject_ref = Call(
    queries.subject_ref,
    lambda a: _read("/v1/subjects/ref", user_id=a["user_id"]),
    _member("subject_ref", str),
    cached=True,
)
embedder_info = Call(queries.embedder_info, lambda a: _read("/v1/embedder"), _as(EmbedderInfo))
delete_event = Call(compliance.delete_event, _delete_event, _erasure)
forget = Call(compliance.forget, _forget, _erasure)
erasure_status = Call(
    compliance.erasure_status,
    lambda a: _read(f"/v1/compliance/requests/{parse_uuid(a['request_id'], 'request id')}"),
    _erasure,
)
get_certificate = Call(
    compliance.get_certificate,
    lambda a: _read(
        f"/v1/compliance/certificates/{parse_uuid(a['certificate_id'], 'certificate id')}"
    ),
    _as(dict[str, Any]),
)
jwks = Call(compliance.jwks, lambda a: _read("/v1/compliance/keys"), _as(dict[str, Any]))
export_subject = Call(
    compliance.export_subject,
    lambda a: _read(f"{_user_path(a, 'export_subject')}/export"),
    _as(dict[str, Any]),
)
export_audit = Call(compliance.export_audit, _export_audit, _text_answer)
