"""The optional chat extractor against a local server speaking the OpenAI chat protocol.

The server is the test's own (``http.server`` in a thread): it records each
request and answers with the reply the test sets, so the extractor's request,
the validation of its reply, and what the worker writes can all be checked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from eventstore.errors import OperationalError
from oblivio import MemoryClient
from oblivio.settings import Settings
from projections import events as ev
from projections.claims.chat import ChatClaimExtractor
from projections.claims.plan import InvalidPlanError, Message, validate_plan
from projections.model import LifecycleState
from tests._json_server import json_server
from tests.memory._support import events_of_type

USER = "sam"


@dataclass
class ChatServer:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    reply: Any = None  # the assistant message content, or an int: an HTTP error status


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    state = ChatServer("")

    def respond(path: str, headers: Any, body: Any) -> tuple[int, object, dict[str, str]]:
        state.requests.append({"path": path, "auth": headers["Authorization"], **body})
        if isinstance(state.reply, int):
            return state.reply, None, {}
        message = {"role": "assistant", "content": state.reply}
        return 200, {"choices": [{"message": message}]}, {}

    with json_server(respond) as url:
        state.url = url
        yield state


def claims_reply(text: str, obj: str, polarity: str = "positive", **extra: Any) -> str:
    claim = {
        "subject": "first_person",
        "predicate": "uses",
        "object": obj,
        "polarity": polarity,
        "modality": "asserted",
        "temporal_intent": "update" if polarity == "negative" else "state",
        "memory_type": "fact",
        "evidence_start": 0,
        "evidence_end": len(text),
        "rule": "chat",
        **extra,
    }
    return json.dumps({"claims": [claim]})


@pytest.fixture
def memory(memory_settings: Settings, chat: ChatServer) -> Iterator[MemoryClient]:
    extractor = ChatClaimExtractor(chat.url, "tiny-model", api_key="sk-test")
    client = MemoryClient(settings=memory_settings, claim_extractor=extractor)
    yield client
    client.close()


def test_claims_from_the_chat_model_retire_like_the_rules(
    memory: MemoryClient, chat: ChatServer
) -> None:
    first_text, second_text = "I rely on an insulin pump.", "The insulin pump is gone for good."
    chat.reply = claims_reply(first_text, "insulin pump")
    first = memory.ingest(
        first_text, user_id=USER, first_person_owner=True, wait_for_extraction=True
    )
    chat.reply = claims_reply(second_text, "insulin pump", "negative")
    second = memory.ingest(
        second_text, user_id=USER, first_person_owner=True, wait_for_extraction=True
    )
    [old] = first.claim_node_ids or ()
    state = memory.get_assertion_state(old, user_id=USER)
    assert state is not None
    assert state.lifecycle is LifecycleState.SUPERSEDED
    assert state.superseded_by == (second.claim_node_ids or ())[0]
    request = chat.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer sk-test"
    assert request["model"] == "tiny-model"
    assert request["response_format"]["type"] == "json_schema"
    assert json.loads(request["messages"][1]["content"])["text"] == first_text
    [plan, _] = [e.data for e in events_of_type(memory, USER, ev.CLAIMS_EXTRACTED)]
    assert plan is not None
    assert plan["plan"]["extractor"] == "oblivio.chat"
    assert plan["plan"]["rules"] == ["model:tiny-model"]


@pytest.mark.parametrize(
    "reply",
    [
        "not json at all",
        json.dumps({"nothing": []}),
        claims_reply("I use Vim.", "Vim", "maybe"),  # not a polarity
        claims_reply("I use Vim.", "Emacs"),  # the object is not in the evidence
        claims_reply("I use Vim.", "Vim", replaces_object="nano"),  # not in the message
        claims_reply("I use Vim.", "Vim", evidence_end=500),  # outside the message
        claims_reply("I use Vim.", "Vim", extra_field=1),  # not in the schema
    ],
)
def test_a_reply_that_is_no_valid_plan_is_rejected(chat: ChatServer, reply: str) -> None:
    chat.reply = reply
    extractor = ChatClaimExtractor(chat.url, "tiny-model")
    with pytest.raises(InvalidPlanError):
        extractor.plan(Message(text="I use Vim.", role="user"))


def test_a_rejected_reply_writes_no_claims(memory: MemoryClient, chat: ChatServer) -> None:
    chat.reply = claims_reply("I use Vim.", "Emacs")
    message = memory.ingest(
        "I use Vim.", user_id=USER, first_person_owner=True, wait_for_extraction=True
    )
    assert message.claim_node_ids == ()
    [plan] = [e.data for e in events_of_type(memory, USER, ev.CLAIMS_EXTRACTED)]
    assert plan is not None
    assert plan["claims"] == []
    assert plan["plan"]["failure"] == "a claim's object does not occur in its evidence"


def test_a_failing_endpoint_leaves_the_message_for_later(
    memory: MemoryClient, chat: ChatServer
) -> None:
    chat.reply = 503
    with pytest.raises(OperationalError):
        memory.ingest("I use Vim.", user_id=USER, first_person_owner=True, wait_for_extraction=True)
    assert events_of_type(memory, USER, ev.CLAIMS_EXTRACTED) == []
    chat.reply = claims_reply("I use Vim.", "Vim")
    later = memory.ingest(
        "I use Emacs.", user_id=USER, first_person_owner=True, wait_for_extraction=True
    )
    assert len(events_of_type(memory, USER, ev.CLAIMS_EXTRACTED)) == 2
    assert later.claim_node_ids is not None


def test_an_unreachable_endpoint_is_an_operational_error() -> None:
    extractor = ChatClaimExtractor("http://127.0.0.1:9", "m", timeout=0.5)
    with pytest.raises(OperationalError):
        extractor.plan(Message(text="I use Vim.", role="user"))
    with pytest.raises(InvalidPlanError):
        validate_plan("[]", Message(text="I use Vim.", role="user"))
