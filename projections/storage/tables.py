"""Tables of the projections, on their own MetaData (migrated as their own branch).

Personal values (node content, caller metadata, session ids, trigger keywords,
attractor text, embeddings) are stored encrypted under the subject's data key
via :class:`eventstore.SubjectCipher`; everything else is state and ids.
"""

from __future__ import annotations

import sqlalchemy as sa

from eventstore.schema import UTCDateTime

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "pk": "pk_%(table_name)s",
    }
)

StreamId = sa.BigInteger

# The tables a forget purges in bulk are keyed by subject first.  Their rows
# (and index entries) for one stream then sit on neighbouring pages, so the
# purge rewrites a number of pages that grows with the subject, not with the
# store: with random-UUID keys each deleted row touched its own page of every
# such index, and a forget grew with the store.  On SQLite the small-row
# tables are WITHOUT ROWID (``sqlite_with_rowid=False``), so the table itself
# is that ordered B-tree.  memory_vectors keeps its rowid: its ~1.1 kB rows
# would spill into an overflow page each, which secure_delete then rewrites
# on purge.

memory_events = sa.Table(
    "memory_events",
    metadata,
    sa.Column("stream_id", StreamId, primary_key=True),
    sa.Column("event_id", sa.Uuid, primary_key=True),
    sa.Column("scope", sa.String(32), nullable=False),
    sa.Column("recorded_at", UTCDateTime(), nullable=False),
    sqlite_with_rowid=False,
)

nodes = sa.Table(
    "memory_nodes",
    metadata,
    sa.Column("node_id", sa.Uuid, nullable=False),
    sa.Column("stream_id", StreamId, nullable=False),
    sa.Column("event_id", sa.Uuid, nullable=False),
    sa.Column("ordinal", sa.Integer, nullable=False),
    sa.Column("node_type", sa.String(32), nullable=False),
    sa.Column("scope", sa.String(32), nullable=False),
    sa.Column("source_type", sa.String(32), nullable=False),
    sa.Column("lifecycle", sa.String(32), nullable=False),
    sa.Column("content", sa.LargeBinary, nullable=False),
    sa.Column("meta", sa.LargeBinary, nullable=False),
    sa.Column("session_id", sa.LargeBinary, nullable=True),
    sa.Column("confidence_base", sa.Float, nullable=False),
    sa.Column("salience_base", sa.Float, nullable=False),
    sa.Column("reinforcement_boost", sa.Float, nullable=False),
    sa.Column("reinforcement_count", sa.Integer, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    sa.Column("last_reinforced_at", UTCDateTime(), nullable=True),
    sa.Column("superseded_by", sa.Uuid, nullable=True),
    # Set by a memory.archived event: the node left default retrieval (the
    # retrieval tier was over capacity); still readable, exported, erasable.
    sa.Column("archived_at", UTCDateTime(), nullable=True),
    # Effective time (docs/memory.md, "Time"): when the statement took effect, and
    # when a correction ended its validity.  Plain state, like the lifecycle.
    sa.Column("occurred_at", UTCDateTime(), nullable=False),
    sa.Column("valid_to", UTCDateTime(), nullable=True),
    # A node is the ordinal-th node its event derives (its id is a function
    # of the two), so the subject's nodes sit in event order, each event's
    # nodes in extraction order.
    sa.PrimaryKeyConstraint("stream_id", "event_id", "ordinal"),
    # No index by node id: a node named by id alone is found through
    # node_directory below, which forget does not purge.
    sqlite_with_rowid=False,
)

# Which event, and which of its nodes, a node id stands for: the inverse of
# projections.events.node_id (a one-way uuid5) for the events of this store.
# It serves callers that name a node but not its subject (an operator's
# get_node, ownership checks before a supersede or reinforce), through its index
# by node id, and those that know the stream, through its key.  Keyed by stream
# like the nodes themselves: on a cluster its rows sit on the stream's shard, so
# a store writes one shard (a lookup by node id alone asks every shard).  A node
# id belongs to one stream (it derives from an event, or for an entity from an
# identity that names its stream).  Erasure leaves these rows in place, so
# forget deletes no entry of an index by a random key; an index by node id on
# memory_nodes cost about one page write per purged node once the store was
# large.  The rows are content-free: the
# node id is a public function of the event id and ordinal, and the event id
# is what the event's tombstone keeps anyway (docs/gdpr.md, "What erasure
# leaves in the database").  A lookup of an erased node passes the directory
# and finds no node, as for an id that never existed.
node_directory = sa.Table(
    "memory_node_directory",
    metadata,
    sa.Column("stream_id", StreamId, primary_key=True),
    sa.Column("node_id", sa.Uuid, primary_key=True),
    sa.Column("event_id", sa.Uuid, nullable=False),
    sa.Column("ordinal", sa.Integer, nullable=False),
    sa.Index(None, "node_id"),
    sqlite_with_rowid=False,
)

edges = sa.Table(
    "memory_edges",
    metadata,
    sa.Column("edge_id", sa.Uuid, primary_key=True),
    sa.Column("stream_id", StreamId, nullable=False, index=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("source_node", sa.Uuid, nullable=False, index=True),
    sa.Column("target_node", sa.Uuid, nullable=False, index=True),
    sa.Column("event_id", sa.Uuid, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("resolved_at", UTCDateTime(), nullable=True),
)

# Idempotency keys of commands (supersede pairs, reinforce request ids),
# scoped to one stream generation.  The fingerprint is a keyed hash of the
# request, so a reused key with a different request is recognised without
# storing the request itself.
operations = sa.Table(
    "memory_operations",
    metadata,
    sa.Column("stream_id", StreamId, primary_key=True),
    sa.Column("operation_key", sa.String(100), primary_key=True),
    sa.Column("fingerprint", sa.LargeBinary(32), nullable=False),
    sa.Column("event_id", sa.Uuid, nullable=False),
    # delete_event drops the rows of the events it re-derives (pj0008).
    sa.Index("ix_memory_operations_stream_id_event_id", "stream_id", "event_id"),
)

# A node has one vector per embedder in play: during a re-embedding job the
# old embedder's vectors keep serving while the new one's are written beside
# them (blue/green); retrieval reads only the subject's serving embedder.
vectors = sa.Table(
    "memory_vectors",
    metadata,
    sa.Column("stream_id", StreamId, primary_key=True),
    sa.Column("node_id", sa.Uuid, primary_key=True),
    sa.Column("embedder", sa.String(100), primary_key=True),
    sa.Column("dimension", sa.Integer, nullable=False),
    sa.Column("event_id", sa.Uuid, nullable=False),
    sa.Column("embedding", sa.LargeBinary, nullable=False),
)

# The embedder is a property of the store, not of a process: ``current`` is
# the one every process must be configured with (or inherits); ``target`` is
# the one a running re-embedding job moves the store to.  ``spec`` is the name
# it was chosen by (``wordllama:256``); NULL for an embedder supplied in code.
vector_embedders = sa.Table(
    "vector_embedders",
    metadata,
    sa.Column("role", sa.String(16), primary_key=True),  # current | target
    sa.Column("name", sa.String(100), nullable=False),
    sa.Column("spec", sa.String(300), nullable=True),
    sa.Column("dimension", sa.Integer, nullable=False),
    sa.Column("recorded_at", UTCDateTime(), nullable=False),
)

# Subjects a re-embedding job has already switched to the target embedder.
subject_embedders = sa.Table(
    "subject_embedders",
    metadata,
    sa.Column("stream_id", StreamId, primary_key=True),
    sa.Column("embedder", sa.String(100), nullable=False),
    sqlite_with_rowid=False,
)

# Re-embedding jobs an operator starts; their work units (one per subject) are
# leased work of kind ``reembed`` in the log's ``rebuild_jobs``
# (projections.storage.vector_rebuilds).
vector_rebuilds = sa.Table(
    "vector_rebuilds",
    metadata,
    sa.Column("rebuild_id", sa.Uuid, primary_key=True),
    sa.Column("embedder", sa.String(100), nullable=False),
    sa.Column("spec", sa.String(300), nullable=True),
    sa.Column("scope", sa.String(16), nullable=False),  # all | subject
    sa.Column("status", sa.String(16), nullable=False),  # running | done | failed
    sa.Column("subjects_total", sa.Integer, nullable=False),
    sa.Column("nodes_total", sa.BigInteger, nullable=False),
    sa.Column("requested_by", sa.String(200), nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("finished_at", UTCDateTime(), nullable=True),
    sa.Column("last_error", sa.String(500), nullable=True),
)

triggers = sa.Table(
    "retrieval_triggers",
    metadata,
    sa.Column("trigger_id", sa.Uuid, primary_key=True),
    sa.Column("stream_id", StreamId, nullable=False, index=True),
    sa.Column("event_id", sa.Uuid, nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),  # keyword/text/embedding, encrypted
    sa.Column("weight", sa.Float, nullable=False),
    sa.Column("threshold", sa.Float, nullable=False),
)

attractors = sa.Table(
    "retrieval_attractors",
    metadata,
    sa.Column("attractor_id", sa.Uuid, primary_key=True),
    sa.Column("stream_id", StreamId, nullable=False, index=True),
    sa.Column("event_id", sa.Uuid, nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),  # text/description/source/embedding
    sa.Column("severity", sa.Float, nullable=False),
)

# How often retrieval returned each node: operational statistics, not state.
# No event records a read, so replay cannot rebuild these rows and no digest
# covers them (like a cache); erasure deletes them with the nodes they count
# (workers.erasure), and rebuilds leave them alone.  Keyed subject first, then
# source event, so forget and delete_event each delete one key range.
node_access = sa.Table(
    "memory_node_access",
    metadata,
    sa.Column("stream_id", StreamId, primary_key=True),
    sa.Column("event_id", sa.Uuid, primary_key=True),
    sa.Column("node_id", sa.Uuid, primary_key=True),
    sa.Column("accesses", sa.BigInteger, nullable=False),
    sa.Column("last_accessed_at", UTCDateTime(), nullable=False),
    sqlite_with_rowid=False,
)

checkpoints = sa.Table(
    "projection_checkpoints",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("partition", sa.Integer, primary_key=True),
    sa.Column("commit_group", sa.BigInteger, nullable=False),
    sa.Column("position", sa.BigInteger, nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
)

# How far an asynchronous projection has applied each stream: the version (and log
# cursor) of the stream's last event it applied.  Both ways of applying events go
# through this row (workers.projector): the runner's pages of a log partition and
# a consistent read's catch-up of its own stream.  Each locks the row, applies
# only the events after it and moves it, in one transaction, so an event is applied
# once whoever gets there first.  Keyed by stream: on Citus the row sits on the
# stream's shard, so a read's catch-up touches that one shard.  No personal data.
stream_marks = sa.Table(
    "projection_stream_marks",
    metadata,
    sa.Column("stream_id", StreamId, primary_key=True),
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("commit_group", sa.BigInteger, nullable=False),
    sa.Column("position", sa.BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

# Structured claims (from ingest()): one row per claim node, beside its row in
# memory_nodes.  ``match_key`` is a keyed hash of what a later correction
# must share with the claim to retire it (resolved subject, predicate class,
# scope, source type, memory type, and whether it is a known positive,
# unconditional observation), so the extraction worker finds its candidates
# by index without decrypting the subject's other claims.  The validity
# interval starts at the source-effective time; ``valid_to`` is set when a
# correction closes it.  ``correction`` says what the claim did to earlier
# ones (retired, ambiguous, conditional, …), so ambiguous cases stay visible.
claims = sa.Table(
    "memory_claims",
    metadata,
    sa.Column("stream_id", StreamId, primary_key=True),
    sa.Column("node_id", sa.Uuid, primary_key=True),
    sa.Column("event_id", sa.Uuid, nullable=False),
    sa.Column("plan_event_id", sa.Uuid, nullable=False),
    sa.Column("match_key", sa.LargeBinary(32), nullable=False),
    sa.Column("valid_from", UTCDateTime(), nullable=False),
    sa.Column("valid_to", UTCDateTime(), nullable=True),
    sa.Column("correction", sa.String(32), nullable=False),
    sa.Index("ix_memory_claims_stream_id_match_key", "stream_id", "match_key"),
    # A back-dated claim looks for corrections effective after it (claims.publication).
    sa.Index("ix_memory_claims_stream_id_valid_from", "stream_id", "valid_from"),
    sqlite_with_rowid=False,
)

# Keyed items (``put_item``): the revisions of each item a caller names by a
# key of its own (LangGraph's namespace and key, through OblivioStore), so
# that reading or replacing one item finds its revisions by index instead of
# decrypting the subject's stream.  ``item`` is a keyed hash of the caller's
# key under the subject's data key (SubjectCipher.mac): the key itself is
# only in the encrypted event, and the hash means nothing once the key is
# destroyed.  One row per readable revision; in the order their values took
# effect (``occurred_at``, then stream order) the last is the current one: a
# revision stored with an earlier effective time is history.  ``expires_at``
# is the revision's retention (a TTL), moved by memory.item_expiry events.
items = sa.Table(
    "memory_items",
    metadata,
    sa.Column("stream_id", StreamId, primary_key=True),
    sa.Column("item", sa.LargeBinary(32), primary_key=True),
    sa.Column("version", sa.BigInteger, primary_key=True),
    sa.Column("event_id", sa.Uuid, nullable=False),
    sa.Column("recorded_at", UTCDateTime(), nullable=False),
    sa.Column("expires_at", UTCDateTime(), nullable=True),
    sa.Column("occurred_at", UTCDateTime(), nullable=False),
    # memory.item_expiry names the revision by event id; subject first, like the key.
    sa.Index("ix_memory_items_stream_id_event_id", "stream_id", "event_id"),
    sqlite_with_rowid=False,
)

# Which nodes each event other than memory.stored touched (set states of,
# linked, retired, named, moved the expiry of): with the nodes' own event_id,
# the dependencies delete_event follows to re-derive only what an erased
# event reached (projections.graph.NodeGraphProjection.remove_events).
node_refs = sa.Table(
    "memory_node_refs",
    metadata,
    sa.Column("stream_id", StreamId, primary_key=True),
    sa.Column("event_id", sa.Uuid, primary_key=True),
    sa.Column("node_id", sa.Uuid, primary_key=True),
    sa.Index("ix_memory_node_refs_stream_id_node_id", "stream_id", "node_id"),
    sqlite_with_rowid=False,
)

# Streams whose node graph predates memory_node_refs (and perhaps memory_items):
# migration pj0008 marks every stream with nodes; the stream's graph is rebuilt
# from the log once, on its first item operation or its next delete_event, and
# purging the stream (which every rebuild does) drops the mark.  Not state: no
# digest covers it.
graph_backfills = sa.Table(
    "memory_graph_backfills",
    metadata,
    sa.Column("stream_id", StreamId, primary_key=True),
    sqlite_with_rowid=False,
)

# Verified snapshots of derived state, for certified deletes whose proof costs what
# they change (projections.proofs).  One row per (stream, projection, bucket): the
# item digests of a *replay* of the stream (never of the live rows), each with the
# one id that places it in a part (an event or node id), in buckets by that id so a
# proof reads and rewrites only the buckets its part reaches; bucket -1 is the
# header (position, bucket digests).  Sealed under the subject's key: forget
# destroys the key and deletes the rows.  The header row also names, in the clear,
# the stream version its replay covers (``streams.version`` is clear too): the
# background build (projections.storage.snapshot_jobs) finds the streams whose
# history grew past its threshold since their snapshot without opening any.
projection_snapshots = sa.Table(
    "projection_snapshots",
    metadata,
    sa.Column("stream_id", StreamId, primary_key=True),
    sa.Column("projection", sa.String(64), primary_key=True),
    sa.Column("bucket", sa.Integer, primary_key=True),
    sa.Column("sealed", sa.LargeBinary, nullable=False),
    sa.Column("stream_version", sa.BigInteger, nullable=True),
    sqlite_with_rowid=False,
)

# The part of a stream each erasure changed (the events and nodes the node graph
# re-derived), numbered per stream, so that the next proof of every projection
# knows what changed since its snapshot; ``whole`` marks an erasure that rebuilt
# the stream (no part to name).  Sealed: which memories depend on which is the
# subject's.  Forget deletes them with the stream's snapshots.
erased_parts = sa.Table(
    "projection_erased_parts",
    metadata,
    sa.Column("stream_id", StreamId, primary_key=True),
    sa.Column("seq", sa.BigInteger, primary_key=True),
    sa.Column("whole", sa.Boolean, nullable=False),
    sa.Column("sealed", sa.LargeBinary, nullable=True),
    sqlite_with_rowid=False,
)

# What a rebuild job proved, beyond its two digests (which rebuild_jobs keeps):
# the snapshot it started from and the part it replayed, as the certificate states
# them.  Content-free (counts, positions, digests); deleted when the certificate
# that states it is issued.
projection_proofs = sa.Table(
    "projection_proofs",
    metadata,
    sa.Column("stream_id", StreamId, primary_key=True),
    sa.Column("job_id", sa.Uuid, primary_key=True),
    sa.Column("proof", sa.Text, nullable=False),
    sqlite_with_rowid=False,
)

# Images of the retrieval index (projections.index_image): one subject's built
# index, sealed under its data key and cut into chunks of a few MB, so a cold
# process reads it in one statement instead of one row per node.  The stream
# version it reflects is in the clear (which image is newer, without opening
# one); what else it was built from (erasures, rebuilds, embedder, graph mark)
# is bound into each chunk's associated data.  Erasure deletes them.
retrieval_images = sa.Table(
    "retrieval_images",
    metadata,
    sa.Column("stream_id", StreamId, primary_key=True),
    sa.Column("chunk", sa.Integer, primary_key=True),
    sa.Column("stream_version", sa.BigInteger, nullable=False),
    sa.Column("chunks", sa.Integer, nullable=False),
    sa.Column("image_id", sa.Uuid, nullable=False),
    sa.Column("sealed", sa.LargeBinary, nullable=False),
)
