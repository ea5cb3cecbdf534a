"""``OblivioStore``: LangGraph's long-term memory store (``BaseStore``) on oblivio.

Install with ``pip install 'oblivio[langgraph]'``.  The mapping of namespaces,
keys and values onto memories is in :mod:`oblivio.integrations.documents`;
docs/integrations.md describes it for users.  In short:

- the configured ``user_segment`` of a namespace is the data subject; the rest
  of the namespace, the key and the value are encrypted with that person's key;
- ``put`` stores a revision of an oblivio item (``MemoryClient.put_item``): over
  an existing key its node supersedes the previous revision's in the same
  transaction, under the person's stream lock, and both stay in the log until
  erased; ``get`` finds the item by a keyed hash, without reading the person's
  other memories;
- ``delete`` erases every revision of the item with ``delete_event``, each
  certified; a ``ttl`` is a retention period: :meth:`OblivioStore.sweep_expired`
  (or the sweeper thread) erases expired items the same way, reads never
  return them, and a read with ``refresh_ttl`` moves the expiry (an event);
- ``search`` with a query ranks with oblivio's retrieval (corrections,
  attractors and triggers apply); without one it lists, newest first.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    get_text_at_path,
    tokenize_path,
)

from oblivio import EmbedderInfo, ErasureStatus, NodeType, Scope, SourceType
from oblivio.errors import InvalidInputError
from oblivio.integrations import documents as docs
from oblivio.integrations.clients import Client, checked_client
from oblivio.integrations.documents import Document, DocumentMapping

#: ``retrieve`` ranks at most this many nodes per person and query.
RETRIEVE_LIMIT = 1000
#: Legal ground of TTL erasures: storage limitation (GDPR Art. 5(1)(e)), as for
#: oblivio's own retention sweeps.
TTL_LEGAL_GROUND = "art5-1-e"
TTL_REASON = "ttl_expired"
#: Legal ground of deletions: the person's right to erasure (Art. 17(1)(b)), as
#: for ``delete_event``'s default.
DELETE_LEGAL_GROUND = "art17-1-b"


logger = logging.getLogger(__name__)


def _utc_now() -> datetime:
    return datetime.now(UTC)


#: LangGraph's index path for the whole value; its text is every string in it.
WHOLE_VALUE = "$"
MAPPING_REQUIRED = (
    "OblivioStore needs to know which namespace segment is the person (the data subject "
    'that forget() erases): pass user_segment=1 for namespaces like ("memories", user_id), '
    'or namespace_template=("memories", "{user_id}")'
)


def _mapping(
    user_segment: int | None,
    template: Sequence[str] | None,
    scope: Scope,
    scope_segment: int | None,
) -> DocumentMapping:
    """The subject mapping the caller stated; no default, since a wrong guess would
    file every person under one subject that no ``forget`` of theirs reaches."""
    if template is not None and user_segment is None:
        return DocumentMapping.from_template(template, scope, scope_segment)
    if user_segment is not None and template is None:
        return DocumentMapping(user_segment, scope, scope_segment)
    raise TypeError(MAPPING_REQUIRED)


def _check_embedder(client: Client, index: IndexConfig) -> None:
    """Refuse an index that asks for another embedder than the store's: embedders are
    chosen by name for the whole store, so a store of LangGraph items cannot have its own."""
    embed, dims = index.get("embed"), index.get("dims")
    if embed is None and dims is None:
        return
    store = client.embedder_info()
    names = {store.name, store.spec} - {None}
    if embed is not None and (not isinstance(embed, str) or embed not in names):
        raise TypeError(
            f"index['embed'] may only name the store's embedder ({_spelled(store)}), not "
            f"{_shown(embed)}: oblivio embeds with one embedder per store, chosen by name. "
            "Configure it for the whole store (OBLIVIO_EMBEDDER=NAME, or "
            "MemoryClient(..., embedder=NAME) for a new store; `oblivio rebuild vectors "
            "--all --embedder NAME` moves an existing one), or leave 'embed' out"
        )
    if dims is not None and dims != store.dimension:
        raise TypeError(
            f"index['dims'] is {dims!r}, but the store's embedder ({_spelled(store)}) has "
            f"{store.dimension} dimensions; leave 'dims' out or give {store.dimension}"
        )


def _spelled(store: EmbedderInfo) -> str:
    return repr(store.spec or store.name)


def _shown(embed: object) -> str:
    return repr(embed) if isinstance(embed, str) else f"a {type(embed).__name__}"


def _field(path: str) -> tuple[str, str | list[str]]:
    """An index path, tokenised for ``get_text_at_path`` (the whole value stays ``$``)."""
    return path, path if path == WHOLE_VALUE else tokenize_path(path)


@dataclass(frozen=True)
class _Candidate:
    """A ranked node of a document: its score, the document's locator, its event."""

    score: float
    locator: str
    event_id: uuid.UUID


@dataclass(frozen=True)
class _Best:
    """One person's part of a search page: the best-ranked live documents (up to the
    page), and, when the ranking held fewer, every other live document (kept out of the
    index with ``index=False``, or archived out of the retrieval tier), which a page
    lists after the ranked ones."""

    scored: list[tuple[float, Document]]
    unscored: list[Document]


@dataclass
class _Snapshot:
    """Listings read during one batch, per person; a write drops that person's."""

    client: Client
    by_user: dict[str, dict[str, Document]] = field(default_factory=dict)

    def documents(self, user: str) -> dict[str, Document]:
        if user not in self.by_user:
            self.by_user[user] = docs.read_documents(self.client, user)
        return self.by_user[user]

    def changed(self, user: str) -> None:
        self.by_user.pop(user, None)

    def clear(self) -> None:
        self.by_user.clear()


class OblivioStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are encrypted, erasable oblivio memories.

    ``client`` is an open :class:`oblivio.MemoryClient` (embedded or PostgreSQL;
    the caller closes it); anything else raises ``TypeError``.  The caller must
    say which part of a namespace is the person, with exactly one of
    ``user_segment`` (the segment's index: ``1`` for ``("memories", user_id)``)
    or ``namespace_template`` (LangMem's convention: ``("memories",
    "{user_id}")``, whose placeholder segment is the person and whose other
    segments every namespace must have).  ``scope`` or ``scope_segment``
    choose the oblivio scope (see
    :class:`~oblivio.integrations.documents.DocumentMapping`).  ``index`` takes
    LangGraph's index configuration: ``fields`` choose the memory's text (the
    text at those JSON paths; ``$``, the default, is every string of the value);
    oblivio's one embedder per store embeds it, so ``embed`` may only name the
    store's embedder and ``dims`` only give its dimension (else ``TypeError``).
    ``ttl`` is LangGraph's ``TTLConfig``: ``default_ttl`` applies to puts
    without a TTL, ``sweep_interval_minutes`` is the sweeper's period, and
    ``refresh_on_read`` (default true) whether reads extend an item's TTL
    (``refresh_ttl`` of one call decides for it).  With ``wait=True``
    deletions, sweeps and :meth:`forget` wait for their certificates.
    ``occurred_at_field`` names the top-level value field whose timezone-aware
    ISO 8601 time is when the item's value took effect (its ``occurred_at``;
    default ``"occurred_at"``; ``None``: every put takes effect when stored).
    """

    supports_ttl = True

    def __init__(
        self,
        client: Client,
        *,
        user_segment: int | None = None,
        namespace_template: Sequence[str] | None = None,
        scope: Scope | str = Scope.PERSONAL,
        scope_segment: int | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        node_type: NodeType | str = NodeType.NOTE,
        source_type: SourceType | str = SourceType.AGENT_INFERRED,
        wait: bool = True,
        clock: Callable[[], datetime] = _utc_now,
        occurred_at_field: str | None = "occurred_at",
    ) -> None:
        self.client = checked_client(client, "OblivioStore")
        self.mapping = _mapping(user_segment, namespace_template, docs.scope(scope), scope_segment)
        _check_embedder(self.client, index or {})
        fields = (index or {}).get("fields") or [WHOLE_VALUE]
        self.fields = [_field(path) for path in fields]
        self.ttl_config = ttl
        self.node_type, self.source_type = NodeType(node_type), SourceType(source_type)
        self.wait = wait
        self.clock = clock
        self.occurred_at_field = occurred_at_field
        self._sweeper: threading.Thread | None = None
        self._stop_sweeping = threading.Event()

    # -- BaseStore ------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order; a read sees the writes before it."""
        snapshot = _Snapshot(self.client)
        return [self._run(snapshot, op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def _run(self, snapshot: _Snapshot, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(snapshot, op)
        if isinstance(op, SearchOp):
            return self._search(snapshot, op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(snapshot, op)
        if isinstance(op, PutOp):
            if op.value is None:
                self._erase(snapshot, op.namespace, op.key)
            else:
                self._put(snapshot, op)
            return None
        raise InvalidInputError(f"unknown store operation {type(op).__name__}")

    # -- helpers for callers --------------------------------------------------------

    def erase(self, namespace: tuple[str, ...], key: str) -> list[ErasureStatus]:
        """Delete an item and return the erasure of each of its revisions (with
        certificates when ``wait`` is set); ``[]`` when there is no such item."""
        return self._erase(_Snapshot(self.client), namespace, str(key))

    def forget(self, user_id: str) -> ErasureStatus:
        """Erase everything of one person (GDPR Art. 17): every namespace under their
        user segment, and any other memory they have in oblivio; the certified status."""
        return self.client.forget(user_id, wait=self.wait)

    def sweep_expired(self) -> list[ErasureStatus]:
        """Erase every item whose TTL has passed (reason ``ttl_expired``, certified)."""
        now, erased = self.clock(), []
        for user in self.client.subjects():
            for doc in docs.read_documents(self.client, user).values():
                if doc.expired(now):
                    erased += self._erase_revisions(user, doc, TTL_REASON, TTL_LEGAL_GROUND)
        return erased

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> None:
        """Sweep expired items in a daemon thread every ``sweep_interval_minutes``
        (default: the ``TTLConfig``'s, else 5)."""
        if self._sweeper is not None:
            return
        minutes = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes")
        interval = 60.0 * (minutes or 5)
        self._stop_sweeping.clear()

        def loop() -> None:
            while not self._stop_sweeping.wait(interval):
                try:
                    self.sweep_expired()
                except Exception:  # the next pass retries; a dead sweeper would not
                    logger.exception("TTL sweep failed")

        self._sweeper = threading.Thread(target=loop, name="oblivio-ttl-sweeper", daemon=True)
        self._sweeper.start()

    def stop_ttl_sweeper(self, timeout: float | None = None) -> None:
        self._stop_sweeping.set()
        if self._sweeper is not None:
            self._sweeper.join(timeout)
            self._sweeper = None

    # -- get / put / delete ---------------------------------------------------------

    def _find(self, namespace: Sequence[str], key: str) -> tuple[str, Document] | None:
        """The person and the live document at (namespace, key), found by index."""
        try:
            user = self.mapping.subject(namespace)
            ref = self.client.subject_ref(user)
        except ValueError:  # a namespace this store cannot place holds nothing
            return None
        doc = docs.read_document(self.client, user, docs.locator(ref, namespace, key))
        return None if doc is None or doc.expired(self.clock()) else (user, doc)

    def _get(self, snapshot: _Snapshot, op: GetOp) -> Item | None:
        found = self._find(op.namespace, op.key)
        if found is None:
            return None
        _, doc = found
        if op.refresh_ttl:
            [doc] = self._refreshed(snapshot, [doc])
        return _item(doc)

    def _refreshed(self, snapshot: _Snapshot, found: Sequence[Document]) -> list[Document]:
        """Live documents with their TTLs extended from now, as LangGraph's stores do
        on read: events move the items' retention times (so they replay), one
        transaction per person; a document without a TTL writes nothing."""
        now = self.clock()
        by_user: dict[str, dict[str, datetime | None]] = {}
        refreshed: list[Document] = []
        for doc in found:
            if doc.ttl is not None:
                user = self.mapping.subject(doc.namespace)
                doc = replace(doc, expires_at=now + timedelta(minutes=doc.ttl))
                locator = docs.locator(self.client.subject_ref(user), doc.namespace, doc.key)
                by_user.setdefault(user, {})[locator] = doc.expires_at
            refreshed.append(doc)
        for user, expiries in by_user.items():
            self.client.set_item_expiries(expiries, user_id=user)
            snapshot.changed(user)
        return refreshed

    def _put(self, snapshot: _Snapshot, op: PutOp) -> None:
        namespace, key = tuple(op.namespace), str(op.key)
        user = self._subject_for_write(namespace)
        value = docs.check_value(op.value)
        content, indexed = self._content(value, op.index)
        ref = self.client.subject_ref(user)
        meta = docs.document_meta(ref, namespace, key, value, indexed=indexed, ttl=op.ttl)
        # One transaction under the person's stream lock: the new revision and the
        # retirement of the current one, so racing puts of a key (in any process)
        # leave exactly one current revision.  Another scope than the item's is
        # refused (ItemScopeConflictError), since a correction stays in one scope.
        self.client.put_item(
            docs.locator(ref, namespace, key),
            content,
            user_id=user,
            scope=self.mapping.scope_of(namespace),
            node_type=self.node_type,
            source_type=self.source_type,
            meta=meta,
            expires_at=None if op.ttl is None else self.clock() + timedelta(minutes=op.ttl),
            occurred_at=self._occurred_at(value),
        )
        snapshot.changed(user)

    def _occurred_at(self, value: dict[str, Any]) -> str | None:
        """The value's effective time, as ``put_item`` checks it (a typed error when
        the field is there but no timezone-aware ISO 8601 time)."""
        if self.occurred_at_field is None or value.get(self.occurred_at_field) is None:
            return None
        given = value[self.occurred_at_field]
        if not isinstance(given, str):
            raise InvalidInputError(
                f"value[{self.occurred_at_field!r}] must be an ISO 8601 date and time"
            )
        return given

    def _subject_for_write(self, namespace: tuple[str, ...]) -> str:
        try:
            user = self.mapping.subject(namespace)
            self.mapping.scope_of(namespace)
            self.client.subject_ref(user)
        except ValueError as e:
            raise InvalidNamespaceError(str(e)) from e
        return user

    def _content(self, value: dict[str, Any], index: Any) -> tuple[str, bool]:
        """The memory's text: the text at the indexed fields (every string of the value
        for ``$``), or, when there is none, the whole value as JSON, then marked
        unindexed (query searches rank it last, unscored)."""
        if index is False:
            texts: list[str] = []
        else:
            paths = self.fields if index is None else [_field(p) for p in index]
            texts = [t for _, path in paths for t in _text_at(value, path) if t.strip()]
        if texts:
            return "\n".join(texts), True
        return json.dumps(value, ensure_ascii=False, sort_keys=True), False

    def _erase(
        self, snapshot: _Snapshot, namespace: Sequence[str], key: str
    ) -> list[ErasureStatus]:
        found = self._find(namespace, key)
        if found is None:
            return []
        user, doc = found
        snapshot.changed(user)
        return self._erase_revisions(user, doc, "user_request", DELETE_LEGAL_GROUND)

    def _erase_revisions(
        self, user: str, doc: Document, reason: str, legal_ground: str
    ) -> list[ErasureStatus]:
        return [
            self.client.delete_event(
                event_id, user_id=user, reason=reason, legal_ground=legal_ground, wait=self.wait
            )
            for event_id in reversed(doc.event_ids)
        ]

    # -- search ---------------------------------------------------------------------

    def _users(self, prefix: Sequence[str]) -> list[str]:
        fixed = self.mapping.fixed_subject(prefix)
        return [fixed] if fixed is not None else self.client.subjects()

    def _matching(self, snapshot: _Snapshot, user: str, op: SearchOp) -> dict[str, Document]:
        now = self.clock()
        return {
            loc: d
            for loc, d in snapshot.documents(user).items()
            if not d.expired(now)
            and docs.namespace_matches(d.namespace, op.namespace_prefix, suffix=False)
            and docs.filter_matches(d.value, op.filter)
        }

    def _search(self, snapshot: _Snapshot, op: SearchOp) -> list[SearchItem]:
        page = self._ranked_page(op) if op.query else None
        if page is None:
            page = self._listed_page(snapshot, op)
        if op.refresh_ttl:
            refreshed = self._refreshed(snapshot, [doc for _, doc in page])
            page = [(score, doc) for (score, _), doc in zip(page, refreshed, strict=True)]
        return [_search_item(doc, score) for score, doc in page]

    def _ranked_page(self, op: SearchOp) -> list[tuple[float | None, Document]] | None:
        """The page of a query search from the ranking alone, when the ranking holds it.

        Each person's nodes are ranked by oblivio's retrieval, the namespace and
        filter tested on the ranked nodes' own metadata in rank order, and only
        the documents that may reach the page are read (by key, with their
        history and retention time): nothing grows with the person's other items.
        ``None`` when fewer indexed documents match than the page reaches past
        (the page then holds unscored ones, which only a listing finds).
        """
        wanted = op.offset + op.limit
        scored: list[tuple[float, Document]] = []
        unscored: list[Document] = []
        for user in self._users(op.namespace_prefix):
            found = self._best_documents(user, op, wanted)
            if found is None:
                return None
            scored += found.scored
            unscored += found.unscored
        scored.sort(key=lambda pair: pair[0], reverse=True)  # stable: ties keep rank order
        # Fewer ranked than the page: every person's ranking was exhausted, so the
        # unindexed documents are all here; they follow, newest first, as in a listing.
        unscored.sort(key=lambda d: d.updated_at, reverse=True)
        page: list[tuple[float | None, Document]] = [*scored, *((None, d) for d in unscored)]
        return page[op.offset : wanted]

    def _best_documents(self, user: str, op: SearchOp, wanted: int) -> _Best | None:
        """``user``'s part of the page; None when the ranking (bounded by
        RETRIEVE_LIMIT) ends before ``wanted`` are found and more documents may exist.

        The retrieval itself keeps only the nodes under the namespace prefix (a
        ``meta`` filter applied before ranking), so documents in a person's other
        namespaces neither crowd the ranking nor send the search to a listing.
        """
        # As deep as the page first (what a plain retrieve of the page costs): every
        # node matches unless a filter narrows; deeper only when it did.
        depth = min(RETRIEVE_LIMIT, wanted)
        under_prefix = docs.namespace_condition(op.namespace_prefix)
        while True:
            assert op.query is not None
            # Archived nodes too: their documents are live, and a page that the
            # ranked ones do not fill lists them after those, as a listing does.
            results = self.client.retrieve(
                op.query, user_id=user, limit=depth, meta=under_prefix, include_archived=True
            ).results
            indexed, unindexed = self._candidates(results, op)
            found = self._live(user, indexed, wanted)
            if len(found) >= wanted:
                return _Best(found, [])
            if len(results) < depth:  # every node under the prefix was ranked
                rest = self._live(user, unindexed, len(unindexed), indexed_only=False)
                # A document whose other node ranked (only one of its nodes archived)
                # is on the page already.
                ranked = {(doc.namespace, doc.key) for _, doc in found}
                return _Best(found, [d for _, d in rest if (d.namespace, d.key) not in ranked])
            if depth == RETRIEVE_LIMIT:
                return None
            depth = min(RETRIEVE_LIMIT, depth * 4)

    def _candidates(
        self, results: Sequence[Any], op: SearchOp
    ) -> tuple[list[_Candidate], list[_Candidate]]:
        """The ranked nodes of documents that match ``op``, in rank order, read from the
        nodes' metadata alone: those of indexed documents, and those of documents kept
        out of the index or archived out of the retrieval tier (which a page gives no
        score, as the listing does)."""
        indexed: list[_Candidate] = []
        unindexed: list[_Candidate] = []
        for result in results:
            meta = result.node.meta
            loc = meta.get(docs.LOCATOR)
            if not isinstance(loc, str):
                continue  # a memory stored by other means
            namespace, _ = docs.node_address(meta)
            if docs.namespace_matches(
                namespace, op.namespace_prefix, suffix=False
            ) and docs.filter_matches(json.loads(meta[docs.VALUE]), op.filter):
                scored = meta.get(docs.INDEXED, True) and result.node.archived_at is None
                chosen = indexed if scored else unindexed
                chosen.append(_Candidate(result.score, loc, result.node.event_id))
        return indexed, unindexed

    def _live(
        self,
        user: str,
        candidates: Sequence[_Candidate],
        wanted: int,
        *,
        indexed_only: bool = True,
    ) -> list[tuple[float, Document]]:
        """Up to ``wanted`` documents of the candidates, best node of each, that are live
        (their current revision, not expired) and, with ``indexed_only``, indexed; read
        by key in batches, in rank order."""
        now, found, seen = self.clock(), [], set()
        for start in range(0, len(candidates), max(wanted, 1)):
            batch = candidates[start : start + wanted]
            documents = docs.read_documents(self.client, user, [c.locator for c in batch])
            for candidate in batch:
                doc = documents.get(candidate.locator)
                if (
                    candidate.locator in seen
                    or doc is None
                    or doc.event_id != candidate.event_id
                    or (indexed_only and not doc.indexed)
                    or doc.expired(now)
                ):
                    continue
                seen.add(candidate.locator)
                found.append((candidate.score, doc))
            if len(found) >= wanted:
                return found[:wanted]
        return found

    def _listed_page(
        self, snapshot: _Snapshot, op: SearchOp
    ) -> list[tuple[float | None, Document]]:
        """The page from every matching document of each person: ranked ones first (with
        a query), then the others, newest first."""
        scored: list[tuple[float, Document]] = []
        unscored: list[Document] = []
        for user in self._users(op.namespace_prefix):
            matching = self._matching(snapshot, user, op)
            ranked = self._ranked(user, op.query, matching) if op.query else []
            scored += ranked
            seen = {id(d) for _, d in ranked}
            unscored += [d for d in matching.values() if id(d) not in seen]
        scored.sort(key=lambda pair: pair[0], reverse=True)
        unscored.sort(key=lambda d: d.updated_at, reverse=True)
        page: list[tuple[float | None, Document]] = [*scored, *((None, d) for d in unscored)]
        return page[op.offset : op.offset + op.limit]

    def _ranked(
        self, user: str, query: str, matching: dict[str, Document]
    ) -> list[tuple[float, Document]]:
        """Matching, indexed documents in oblivio's retrieval order, with its scores.

        LangGraph's filter chose ``matching``; retrieval ranks only their nodes
        (``event_ids``), so a filtered search finds every match, however far down
        the person's unfiltered ranking it would sit.
        """
        chosen = [d.event_id for d in matching.values() if d.indexed]
        if not chosen:
            return []
        retrieval = self.client.retrieve(
            query, user_id=user, limit=RETRIEVE_LIMIT, event_ids=chosen
        )
        ranked: dict[str, tuple[float, Document]] = {}
        for result in retrieval.results:
            loc = result.node.meta.get(docs.LOCATOR)
            if not isinstance(loc, str):
                continue  # a memory stored by other means
            doc = matching.get(loc)
            if doc is not None and doc.indexed and doc.event_id == result.node.event_id:
                ranked.setdefault(loc, (result.score, doc))  # best node of the document
        return list(ranked.values())

    # -- namespaces -----------------------------------------------------------------

    def _list_namespaces(self, snapshot: _Snapshot, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        prefixes = [c.path for c in conditions if c.match_type == "prefix"]
        users = self._users(prefixes[0]) if prefixes else self.client.subjects()
        now = self.clock()
        found = {
            d.namespace
            for user in users
            for d in snapshot.documents(user).values()
            if not d.expired(now)
            and all(
                docs.namespace_matches(d.namespace, c.path, suffix=c.match_type == "suffix")
                for c in conditions
            )
        }
        if op.max_depth is not None:
            found = {ns[: op.max_depth] for ns in found}
        return sorted(found)[op.offset : op.offset + op.limit]


def _text_at(value: dict[str, Any], path: str | list[str]) -> list[str]:
    if path == WHOLE_VALUE:
        return docs.value_text(value)
    return get_text_at_path(value, path)


def _fields(doc: Document) -> dict[str, Any]:
    return {
        "namespace": doc.namespace,
        "key": doc.key,
        "value": doc.value,
        "created_at": doc.created_at,
        "updated_at": doc.updated_at,
    }


def _item(doc: Document) -> Item:
    return Item(**_fields(doc))


def _search_item(doc: Document, score: float | None) -> SearchItem:
    return SearchItem(**_fields(doc), score=score)
