"""``default_meta`` (seed: correcting memories, mechanism 4): merged as ``{**default, **meta}``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from eventstore import InvalidInputError
from oblivio import MemoryClient, MemoryEngine
from oblivio.settings import Settings


def meta_of(client: MemoryClient, event_id: Any, user_id: str) -> dict[str, Any]:
    event = client.get_event(event_id, user_id=user_id)
    assert event is not None
    return event.meta


def test_the_call_wins_and_later_mutation_changes_nothing(memory_settings: Settings) -> None:
    defaults: dict[str, Any] = {"channel": "chat", "confidence": 0.5}
    with MemoryClient(settings=memory_settings, default_meta=defaults) as client:
        defaults["channel"] = "changed after the client was built"
        call: dict[str, Any] = {"source": "erp", "confidence": 1.0}
        first = client.store("Account balance: 1,247.38 EUR", user_id="c42", meta=call)
        call["confidence"] = 0.1  # after the call: the stored event must not follow
        plain = client.store("My balance is 1,200 EUR", user_id="c42")

        assert meta_of(client, first, "c42") == {
            "channel": "chat",
            "source": "erp",
            "confidence": 1.0,
        }
        assert meta_of(client, plain, "c42") == {"channel": "chat", "confidence": 0.5}


def test_a_handle_bound_to_one_user_layers_its_defaults(memory_settings: Settings) -> None:
    with MemoryClient(settings=memory_settings, default_meta={"channel": "chat"}) as client:
        customer = client.for_user("c42", default_meta={"source": "user", "confidence": 0.6})
        event_id = customer.store("My balance is 1,200 EUR", meta={"confidence": 0.7})
        [hit] = customer.retrieve("balance").results
        assert hit.node.content == "My balance is 1,200 EUR"
        assert [e.id for e in customer.get_events()] == [event_id]
        assert client.get_events(user_id="someone-else") == []
        assert meta_of(client, event_id, "c42") == {
            "channel": "chat",
            "source": "user",
            "confidence": 0.7,
        }
        # The handle leaves the client's own defaults alone.
        other = client.store("I prefer email.", user_id="c42")
        assert meta_of(client, other, "c42") == {"channel": "chat"}
        assert customer.verify_log().ok


def test_the_async_handle_does_the_same(memory_settings: Settings) -> None:
    async def run() -> dict[str, Any]:
        async with MemoryEngine(settings=memory_settings, default_meta={"channel": "voice"}) as eng:
            customer = eng.for_user("c42")
            event_id = await customer.store("Call me after six.", meta={"source": "user"})
            event = await customer.get_event(event_id)
            assert event is not None
            return event.meta

    assert asyncio.run(run()) == {"channel": "voice", "source": "user"}


@pytest.mark.parametrize(
    "bad", [{"confidence": 1.5}, {"nested": {"a": 1}}, {"x": float("nan")}, ["channel"]]
)
def test_an_invalid_default_is_refused_before_anything_is_written(
    memory_settings: Settings, bad: Any
) -> None:
    with pytest.raises(InvalidInputError):
        MemoryClient(settings=memory_settings, default_meta=bad)
    with MemoryClient(settings=memory_settings) as client:
        with pytest.raises(InvalidInputError):
            client.for_user("c42", default_meta=bad)
        assert client.get_events(user_id="c42") == []


def test_ingest_applies_the_defaults_too(memory_settings: Settings) -> None:
    defaults: dict[str, Any] = {"channel": "chat", "confidence": 0.5}
    with MemoryClient(settings=memory_settings, default_meta=defaults) as client:
        call: dict[str, Any] = {"confidence": 0.9}
        one = client.ingest(
            "I use Vim.",
            user_id="c42",
            meta=call,
            first_person_owner=True,
            wait_for_extraction=True,
        )
        call["confidence"] = 0.1  # after the call: nothing stored follows
        defaults["channel"] = "changed"
        reserved = {"oblivio_first_person_owner_v1": True}
        assert meta_of(client, one.event_id, "c42") == {
            "channel": "chat",
            "confidence": 0.9,
            **reserved,
        }
        [claim] = one.claim_node_ids or ()
        node = client.get_node(claim, user_id="c42")
        assert node is not None
        assert node.meta["channel"] == "chat"
        assert node.meta["confidence"] == 0.9
        customer = client.for_user("c42", default_meta={"source": "user"})
        batch = customer.ingest_batch(
            [{"message": "Hello."}, {"message": "Bye.", "meta": {"channel": "voice"}}]
        )
        assert [meta_of(client, m.event_id, "c42") for m in batch] == [
            {"channel": "chat", "confidence": 0.5, "source": "user"},
            {"channel": "voice", "confidence": 0.5, "source": "user"},
        ]


def test_the_async_ingest_applies_the_defaults(memory_settings: Settings) -> None:
    async def run() -> list[dict[str, Any]]:
        async with MemoryEngine(settings=memory_settings, default_meta={"channel": "voice"}) as eng:
            single = await eng.ingest("Call me after six.", user_id="c42", meta={"source": "user"})
            handle = eng.for_user("c42", default_meta={"source": "handle"})
            [batched] = await handle.ingest_batch([{"message": "I like tea."}])
            metas = []
            for message in (single, batched):
                event = await eng.get_event(message.event_id, user_id="c42")
                assert event is not None
                metas.append(event.meta)
            return metas

    assert asyncio.run(run()) == [
        {"channel": "voice", "source": "user"},
        {"channel": "voice", "source": "handle"},
    ]
