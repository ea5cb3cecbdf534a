"""A consistent read reads the state token again only when the likely-update detector
may have appended (issues 29 and 30: p99 right after a store).

The detector's page says whether it judged a memory (then it may have appended a
``memory.likely_update`` event); a wait that did every page itself and judged
nothing needs no second look at the token.  Both backends, real followers.
"""

from __future__ import annotations

import uuid

from oblivio import MemoryClient
from tests.memory.test_ingest import USER

FILLER = ("I keep basil on the kitchen windowsill.", "My favourite colour is green.")


def node_of(memory: MemoryClient, event_id: uuid.UUID) -> uuid.UUID:
    [node] = memory.get_event_nodes(event_id, user_id=USER)
    return node.id


def appended_after(memory: MemoryClient, text: str, *, with_checkpoint: bool = True) -> bool:
    """Store ``text``, then wait for the detector to pass it as a consistent read does
    (from the partition's checkpoint as read before): whether it may have appended."""
    ctx = memory.context
    memory.store(text, user_id=USER)
    head = ctx.store.head(ctx.namespace, USER)
    cursor = ctx.store.last_cursor(ctx.namespace, USER)
    assert head is not None
    assert cursor is not None
    stream_id = head.stream.stream_id
    detector = ctx.updates
    mark = detector.checkpoint(detector.partition_of(stream_id)) if with_checkpoint else None
    followed = detector.catch_up(cursor, stream_id, 10.0, checkpoint=mark)
    assert followed is not None
    return followed.may_have_appended


def test_the_detector_says_whether_its_pages_may_have_appended(memory: MemoryClient) -> None:
    for text in FILLER:
        memory.store(text, user_id=USER)
    memory.retrieve("anything", user_id=USER)
    # No change cue: judged by nobody, nothing appended.
    assert appended_after(memory, "I paddle a green kayak on the lake.") is False
    # A change in plain words of an earlier memory: judged, and a likely update appended.
    assert appended_after(memory, "I sold the kayak and swim now.") is True
    # A wait that did not start from a checkpoint it was given cannot know.
    assert appended_after(memory, "The basil needs water.", with_checkpoint=False) is True


def test_the_first_read_after_a_likely_update_ranks_what_replaced_what(
    memory: MemoryClient,
) -> None:
    for text in FILLER:
        memory.store(text, user_id=USER)
    old = node_of(memory, memory.store("I paddle a green kayak on the lake.", user_id=USER))
    memory.retrieve("anything", user_id=USER)  # the index is cached before the change
    new = node_of(memory, memory.store("I sold the kayak and swim now.", user_id=USER))
    # One consistent read, right after: the detector appends inside it, so it must
    # look at the token again and apply the decision before ranking.
    found = memory.retrieve("How do I get out on the lake by kayak?", user_id=USER, limit=2)
    assert [r.node.id for r in found.results] == [new, old]
    assert found.results[0].components.succession > 0
