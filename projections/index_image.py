"""Images of the retrieval index: a cold process loads a large subject in one read.

Building a subject's :class:`~projections.retrieval_index.SubjectIndex` reads,
decrypts and tokenises every node: seconds at 100,000 nodes, paid by the first
query of every new process.  An *image* is the built index itself, encoded in
columns (vectors, score inputs and ids as arrays, texts, metadata and the BM25
postings as one JSON document), sealed with AES-GCM under the subject's data
key and cut into chunks of :data:`CHUNK_BYTES`, stored in ``retrieval_images``.
Loading it is one statement, one decryption per chunk and no tokenising.

When an image may be used.  Each chunk's associated data binds it to the
stream, the image, its place among the chunks, and everything of the state token
(projections.storage.vector_reads) that a newer index could not be reached
from by applying later events: the stream version it reflects, the erasures
and rebuilds of the subject, the serving embedder, the graph's rebuild mark,
the image format and the scoring configuration.  An image opened against a
token that differs in any of these fails authentication and is not used; one
that reflects an earlier version of the stream is brought up to date by the
refresh path of the retrieval service (the later events applied, as for a
cached index).  A subject whose processing is restricted (Art. 18) loads none.
Erasure deletes the stream's image in its own transaction (the registry calls
:meth:`IndexImages.purge` for every erased event and every forget), and forget
destroys the key it is sealed under.

When an image is written.  Never on the write path: the retrieval service
offers an index it has just built from the rows (and, through
:meth:`IndexImages.save`, which ``close`` calls, each cached index that has
moved past its image); a writer thread encodes it and, in one transaction
holding the stream's lock, checks that the subject's token still matches what
the index reflects before replacing the image.  An erasure or forget either
commits first (the check fails, nothing is written) or waits for the lock and
deletes the new image.  Subjects below ``min_nodes`` get no image: they load
from the rows in well under the time an image saves.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import logging
import struct
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy.engine import Connection

from eventstore import EventStore, IntegrityViolationError, SubjectCipher
from projections.lexical import LexicalIndex
from projections.model import LifecycleState, Node, NodeType, Scope, SourceType
from projections.retrieval_index import IndexParts, NodeColumns, SubjectIndex
from projections.scoring import AttractorProbe, ScoringConfig, TriggerProbe
from projections.storage import image_store
from projections.storage.vector_reads import StateToken, state_token

log = logging.getLogger(__name__)

#: The encoding's version: bound into every chunk, so an image of another layout
#: fails authentication and the subject is built from its rows (and imaged again).
FORMAT = 1
#: Plaintext bytes per sealed chunk: one row each, well below any blob limit.
CHUNK_BYTES = 8 << 20
_PURPOSE = "retrieval.image"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NONE_TIME = np.iinfo(np.int64).min
_NO_ID = bytes(16)
_UNKNOWN_SAFETY = uuid.SafeUUID.unknown  # an enum member's lookup costs a descriptor call
_NODE_TYPES, _SCOPES = list(NodeType), list(Scope)
_SOURCE_TYPES, _LIFECYCLES = list(SourceType), list(LifecycleState)
#: Each member's place in its enum (the code an image stores).
_ENUM_CODES: dict[Any, int] = {
    member: place
    for members in (_NODE_TYPES, _SCOPES, _SOURCE_TYPES, _LIFECYCLES)
    for place, member in enumerate(members)
}
_TIMES = (
    "created_at",
    "updated_at",
    "occurred_at",
    "last_reinforced_at",
    "archived_at",
    "valid_to",
)


# -- encoding -----------------------------------------------------------------------------


def encode(parts: IndexParts) -> bytes:
    """``parts`` as bytes: a length-prefixed JSON document, then raw little-endian arrays."""
    arrays = {**_node_arrays(parts.nodes), **_column_arrays(parts.columns)}
    arrays["vectors"] = np.ascontiguousarray(parts.vectors, dtype="<f4")
    rows, counts, lengths = parts.lexical.postings()
    terms = list(rows)
    arrays["term_ends"] = np.cumsum([len(rows[t]) for t in terms], dtype="<i8")
    arrays["term_rows"] = np.fromiter(chain.from_iterable(rows[t] for t in terms), "<i4")
    arrays["term_counts"] = np.fromiter(chain.from_iterable(counts[t] for t in terms), "<i4")
    arrays["lengths"] = np.asarray(lengths, dtype="<f8")
    document = {
        "stream_id": parts.stream_id,
        "version": parts.version,
        "contents": [n.content for n in parts.nodes],
        "sessions": [n.session_id for n in parts.nodes],
        "meta": [n.meta for n in parts.nodes],
        "terms": terms,
        "triggers": [dataclasses.astuple(t) for t in parts.triggers],
        "attractors": [dataclasses.astuple(a) for a in parts.attractors],
        "item_revisions": sorted(e.hex for e in parts.item_revisions),
        "likely_updates": [[old.hex, new.hex] for old, new in parts.likely_updates],
        "arrays": {name: [a.dtype.str, list(a.shape)] for name, a in arrays.items()},
    }
    head = json.dumps(document, separators=(",", ":"), allow_nan=False).encode()
    return b"".join([struct.pack("<Q", len(head)), head, *(a.tobytes() for a in arrays.values())])


def decode(blob: bytes | memoryview) -> IndexParts:
    """The parts :func:`encode` encoded."""
    view = memoryview(blob)
    (size,) = struct.unpack_from("<Q", view)
    document = json.loads(bytes(view[8 : 8 + size]))
    arrays, offset = {}, 8 + size
    for name, (dtype, shape) in document["arrays"].items():
        count = int(np.prod(shape))
        arrays[name] = np.frombuffer(view, dtype, count, offset).reshape(shape)
        offset += count * np.dtype(dtype).itemsize
    return IndexParts(
        nodes=_nodes(document, arrays),
        vectors=arrays["vectors"],  # float32 ("<f4"); the index copies it into its column
        columns=NodeColumns(
            codes=arrays["codes"],
            numbers=arrays["numbers"],
            last_touch_us=arrays["last_touch_us"],
            validity_us=arrays["validity_us"],
        ),
        lexical=_lexical(document["terms"], arrays),
        triggers=[TriggerProbe(*t) for t in document["triggers"]],
        attractors=[AttractorProbe(*a) for a in document["attractors"]],
        item_revisions={uuid.UUID(e) for e in document["item_revisions"]},
        likely_updates=[(uuid.UUID(o), uuid.UUID(n)) for o, n in document["likely_updates"]],
        version=document["version"],
        stream_id=document["stream_id"],
    )


def _lexical(terms: list[str], arrays: dict[str, npt.NDArray[Any]]) -> LexicalIndex:
    """The BM25 postings: each term's rows and counts are slices of two flat arrays."""
    ends = arrays["term_ends"].tolist()
    starts = [0, *ends[:-1]]
    rows, counts = arrays["term_rows"].tolist(), arrays["term_counts"].tolist()
    return LexicalIndex.from_postings(
        {t: rows[a:b] for t, a, b in zip(terms, starts, ends, strict=True)},
        {t: counts[a:b] for t, a, b in zip(terms, starts, ends, strict=True)},
        arrays["lengths"].tolist(),
    )


def _column_arrays(columns: NodeColumns) -> dict[str, npt.NDArray[Any]]:
    return {
        "codes": np.ascontiguousarray(columns.codes, dtype="i1"),
        "numbers": np.ascontiguousarray(columns.numbers, dtype="<f8"),
        "last_touch_us": np.ascontiguousarray(columns.last_touch_us, dtype="<i8"),
        "validity_us": np.ascontiguousarray(columns.validity_us, dtype="<i8"),
    }


def _node_arrays(nodes: Sequence[Node]) -> dict[str, npt.NDArray[Any]]:
    """The nodes' ids, enums, numbers and times as arrays (texts go in the document)."""

    def ids(values: Sequence[uuid.UUID | None]) -> npt.NDArray[Any]:
        joined = b"".join(_NO_ID if v is None else v.bytes for v in values)
        return np.frombuffer(joined, dtype="u1").reshape(-1, 16)

    return {
        "ids": ids([n.id for n in nodes]),
        "event_ids": ids([n.event_id for n in nodes]),
        "superseded_by": ids([n.superseded_by for n in nodes]),
        "enums": np.asarray(
            [
                [
                    _ENUM_CODES[n.node_type],
                    _ENUM_CODES[n.scope],
                    _ENUM_CODES[n.source_type],
                    _ENUM_CODES[n.lifecycle],
                ]
                for n in nodes
            ],
            dtype="i1",
        ).reshape(-1, 4),
        "scores": np.asarray(
            [[n.confidence_base, n.salience_base, n.reinforcement_boost] for n in nodes],
            dtype="<f8",
        ).reshape(-1, 3),
        "reinforcements": np.asarray([n.reinforcement_count for n in nodes], dtype="<i8"),
        "times": np.asarray(
            [[_micros(getattr(n, name)) for name in _TIMES] for n in nodes], dtype="<i8"
        ).reshape(-1, len(_TIMES)),
    }


def _micros(moment: datetime | None) -> int:
    return _NONE_TIME if moment is None else (moment - _EPOCH) // timedelta(microseconds=1)


def _uuid(value: int) -> uuid.UUID:
    """``uuid.UUID(int=value)`` without its argument checks, which cost half of loading
    an image's ids (the value is a UUID's own, read back from its 16 bytes)."""
    made = object.__new__(uuid.UUID)
    object.__setattr__(made, "int", value)
    object.__setattr__(made, "is_safe", _UNKNOWN_SAFETY)
    return made


def _nodes(document: dict[str, Any], arrays: dict[str, npt.NDArray[Any]]) -> list[Node]:
    def ids(name: str) -> list[uuid.UUID | None]:
        raw = arrays[name].tobytes()
        return [
            None if raw[i : i + 16] == _NO_ID else _uuid(int.from_bytes(raw[i : i + 16]))
            for i in range(0, len(raw), 16)
        ]

    # Each distinct moment is built once (a node's times are often equal), and the
    # columns index into them: one list lookup per time instead of a datetime sum.
    distinct, where = np.unique(arrays["times"], return_inverse=True)
    moments = [
        None if m == _NONE_TIME else _EPOCH + timedelta(microseconds=m) for m in distinct.tolist()
    ]
    where = where.reshape(arrays["times"].shape)

    def times(column: int) -> list[datetime | None]:
        return [moments[i] for i in where[:, column].tolist()]

    enums, scores = arrays["enums"], arrays["scores"]
    created, updated, occurred, reinforced, archived, valid_to = (
        times(c) for c in range(len(_TIMES))
    )
    columns = zip(  # in the order of Node's fields (_NODE_FIELDS)
        ids("ids"),
        ids("event_ids"),
        document["contents"],
        [_NODE_TYPES[c] for c in enums[:, 0].tolist()],
        [_SCOPES[c] for c in enums[:, 1].tolist()],
        [_SOURCE_TYPES[c] for c in enums[:, 2].tolist()],
        [_LIFECYCLES[c] for c in enums[:, 3].tolist()],
        scores[:, 0].tolist(),
        scores[:, 1].tolist(),
        scores[:, 2].tolist(),
        arrays["reinforcements"].tolist(),
        created,
        updated,
        occurred,
        reinforced,
        ids("superseded_by"),
        document["sessions"],
        document["meta"],
        archived,
        valid_to,
        strict=True,
    )
    return [_node(values) for values in columns]


#: Node's fields in order.  Node is a frozen dataclass with a ``__dict__`` and no
#: ``__post_init__``: filling the dict is what its ``__init__`` does, field by field
#: through ``object.__setattr__``, in twice the time (measured at 100,000 nodes).
_NODE_FIELDS = tuple(f.name for f in dataclasses.fields(Node))
assert "__slots__" not in vars(Node)
assert not hasattr(Node, "__post_init__")


def _node(values: Iterable[Any]) -> Node:
    made: Node = object.__new__(Node)
    made.__dict__.update(zip(_NODE_FIELDS, values, strict=True))
    return made


# -- sealing --------------------------------------------------------------------------------


def binding(token: StateToken, stream_version: int, config: ScoringConfig) -> bytes:
    """What an image of the stream at ``stream_version`` was built from, as ``token`` states
    it: bound into each chunk's associated data (see the module docstring)."""
    state = [
        FORMAT,
        token.stream_id,
        stream_version,
        token.erasures,
        token.rebuilds,
        token.embedder,
        token.graph_marked,
        repr(config),
    ]
    return hashlib.sha256(json.dumps(state).encode()).digest()


def _row_id(bound: bytes, image_id: uuid.UUID, chunk: int, chunks: int) -> bytes:
    return bound + image_id.bytes + struct.pack("<II", chunk, chunks)


def seal(cipher: SubjectCipher, bound: bytes, image_id: uuid.UUID, plain: bytes) -> list[bytes]:
    """``plain`` cut into chunks, each sealed under the subject's key."""
    pieces = [plain[i : i + CHUNK_BYTES] for i in range(0, len(plain), CHUNK_BYTES)] or [b""]
    return [
        cipher.seal(_PURPOSE, _row_id(bound, image_id, number, len(pieces)), piece)
        for number, piece in enumerate(pieces)
    ]


def unseal(cipher: SubjectCipher, bound: bytes, stored: image_store.StoredImage) -> bytes | None:
    """The image's plaintext; ``None`` if it is incomplete or was built from another state."""
    if not stored.complete:
        return None
    try:
        return b"".join(
            cipher.open(_PURPOSE, _row_id(bound, stored.image_id, n, stored.expected_chunks), c)
            for n, c in enumerate(stored.chunks)
        )
    except IntegrityViolationError:
        return None


# -- loading and writing ----------------------------------------------------------------------


class IndexImages:
    """Reads images for cold loads and writes them on a thread of their own.

    ``projection`` names the vector state, whose stream marks the state token
    reads.  Thread-safe.
    """

    def __init__(self, store: EventStore, projection: str, min_nodes: int) -> None:
        self.store = store
        self.projection = projection
        self.min_nodes = min_nodes
        self._writers: dict[int, threading.Thread] = {}
        #: The stream version of each stream's image as this process wrote or read it.
        self._versions: dict[int, int] = {}
        self._lock = threading.Lock()

    def load(
        self, conn: Connection, cipher: SubjectCipher, token: StateToken, config: ScoringConfig
    ) -> tuple[StateToken, SubjectIndex] | None:
        """The subject's index as its image holds it, with the token it reflects (the
        caller applies later events); ``None`` without a usable image."""
        if token.restricted or not token.caught_up:
            return None
        stored = image_store.read(conn, token.stream_id, self.store.backend.fetch)
        if stored is None or stored.stream_version > token.version:
            return None
        plain = unseal(cipher, binding(token, stored.stream_version, config), stored)
        if plain is None:
            return None
        with _collection_paused():
            index = SubjectIndex.restore(decode(plain), config)
        with self._lock:
            self._versions[token.stream_id] = stored.stream_version
        return dataclasses.replace(token, version=stored.stream_version), index

    def behind(self, index: SubjectIndex) -> bool:
        """Whether ``index`` is large enough for an image and has moved past the one this
        process last wrote or read for its stream."""
        with self._lock:
            imaged = self._versions.get(index.stream_id)
        return len(index) >= self.min_nodes and (imaged is None or imaged < index.version)

    def offer(self, token: StateToken, index: SubjectIndex) -> None:
        """Write ``index`` (reflecting ``token`` up to its own version) as its stream's
        image, on a writer thread, unless it is small or one is being written."""
        if not self.behind(index):
            return
        with self._lock:
            running = self._writers.get(index.stream_id)
            if running is not None and running.is_alive():
                return
            writer = threading.Thread(
                target=self._write, args=(token, index), name="index-image", daemon=True
            )
            self._writers[index.stream_id] = writer
        writer.start()

    def wait(self) -> None:
        """Block until every image offered so far is written (or given up)."""
        with self._lock:
            writers = list(self._writers.values())
        for writer in writers:
            writer.join()

    def purge(self, conn: Connection, stream_id: int) -> None:
        """Delete the stream's image: erasure calls it in its transaction (the
        projection registry's caches, projections.base.SubjectCache)."""
        image_store.purge_stream(conn, stream_id)

    def _write(self, token: StateToken, index: SubjectIndex) -> None:
        try:
            written = self._write_image(token, index)
        except Exception:  # an image only saves time: never fail a caller over it
            log.warning(
                "writing the retrieval image of stream %s failed", token.stream_id, exc_info=True
            )
            return
        if written is not None:
            with self._lock:
                self._versions[token.stream_id] = written

    def _write_image(self, token: StateToken, index: SubjectIndex) -> int | None:
        """Encode and seal ``index``, then store it if the subject's state still matches;
        the stream version written (``None``: the state moved on, nothing written)."""
        with index.lock:
            parts = index.parts()
        plain = encode(parts)
        image_id = uuid.uuid4()
        with self.store.reading() as view:
            cipher = view.cipher(token.stream_id)
        if cipher is None:
            return None
        sealed = seal(cipher, binding(token, parts.version, index.config), image_id, plain)
        with self.store.transaction(durable=False) as tx:
            stream = tx.lock_stream(token.stream_id)
            if stream is None:
                return None
            now = state_token(
                tx.connection,
                self.store.backend.fetch,
                stream.ref.namespace,
                stream.ref.subject_key,
                self.projection,
            )
            if now is None or not _same_basis(now, token) or now.version < parts.version:
                return None
            image_store.replace(tx.connection, token.stream_id, parts.version, image_id, sealed)
        return parts.version


@contextmanager
def _collection_paused() -> Iterator[None]:
    """No cyclic garbage collection while an image is turned into objects: the hundreds
    of thousands of lists, dicts and nodes of a large subject, none of them garbage,
    would trigger full collections that scan them all again and again (measured: a
    third of the load at 100,000 nodes)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _same_basis(now: StateToken, then: StateToken) -> bool:
    """Whether an index reflecting ``then`` (up to some version) is still what ``now``
    can be reached from by later events."""
    return (
        now.readable
        and not now.restricted
        and now.stream_id == then.stream_id
        and now.erasures == then.erasures
        and now.rebuilds == then.rebuilds
        and now.embedder == then.embedder
        and now.graph_marked == then.graph_marked
    )
