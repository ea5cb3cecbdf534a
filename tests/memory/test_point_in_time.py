"""Point-in-time retrieval: the project's own scenario set of changing lives.

Each person has histories of three to five changes (home, job, car, phone,
partner), told to the store out of order (a later move before an earlier one),
each with the effective time of the change; the caller records each change as
the correction of the value before it.  For every change point, ``as_of`` just
before must answer the previous value first and just after the new one, and the
default retrieve the current value (issue 30's target: 0 wrong of all checks).
The same histories told out of order as revisions of keyed items (``put_item``,
and LangGraph's store over it) need no corrections from the caller: a revision
that took effect before the current one goes into the item's history.  Histories
ingested as messages out of order are corrected by the claim rules, and a
back-dated claim is ended by the correction already stored that names it.
"""

from __future__ import annotations

import itertools
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from eventstore import InvalidInputError
from oblivio import MemoryClient
from projections.model import NodeType


def day(year: int, month: int, dom: int = 1) -> datetime:
    return datetime(year, month, dom, 12, tzinfo=UTC)


@dataclass(frozen=True)
class History:
    """One attribute of one person: the question, and its values with their times."""

    person: str
    question: str
    values: tuple[tuple[datetime, str], ...]


HISTORIES = (
    History(
        "noor",
        "Which city does Noor live in?",
        (
            (day(2015, 9), "Noor lives in the city of Utrecht, in a student room."),
            (day(2018, 2), "Noor lives in the city of Ghent now, above a bakery."),
            (day(2020, 11), "Noor lives in the city of Tallinn since the autumn."),
            (day(2023, 4), "Noor lives in the city of Valencia, near the beach."),
        ),
    ),
    History(
        "noor",
        "Where does Noor work?",
        (
            (day(2016, 1), "Noor works at a bicycle repair shop as a mechanic."),
            (day(2019, 6), "Noor works at a shipping company as a dispatcher."),
            (day(2022, 3), "Noor works at a weather institute as a data analyst."),
        ),
    ),
    History(
        "noor",
        "What car does Noor drive?",
        (
            (day(2017, 5), "Noor drives a rusty green hatchback car."),
            (day(2021, 8), "Noor drives a grey electric estate car."),
            (day(2024, 2), "Noor drives a small yellow convertible car."),
        ),
    ),
    History(
        "tomasz",
        "What is Tomasz's phone number?",
        (
            (day(2014, 3), "Tomasz's phone number is 0612 448 901."),
            (day(2016, 7), "Tomasz's phone number is 0687 220 315."),
            (day(2019, 1), "Tomasz's phone number is 0644 907 128."),
            (day(2021, 10), "Tomasz's phone number is 0653 118 642."),
            (day(2024, 6), "Tomasz's phone number is 0671 530 274."),
        ),
    ),
    History(
        "tomasz",
        "Who is Tomasz's partner?",
        (
            (day(2013, 4), "Tomasz's partner is Ilse, a violin teacher."),
            (day(2017, 9), "Tomasz's partner is Ravi, a ferry captain."),
            (day(2022, 5), "Tomasz's partner is Mireille, a beekeeper."),
        ),
    ),
    History(
        "tomasz",
        "Which city does Tomasz live in?",
        (
            (day(2012, 8), "Tomasz lives in the city of Gdansk by the harbour."),
            (day(2016, 2), "Tomasz lives in the city of Rotterdam in a houseboat."),
            (day(2020, 5), "Tomasz lives in the city of Bergen under the mountains."),
        ),
    ),
    History(
        "ama",
        "Where does Ama work?",
        (
            (day(2011, 10), "Ama works at a bookshop as a cashier."),
            (day(2014, 12), "Ama works at a hospital as a night nurse."),
            (day(2018, 3), "Ama works at a school as a chemistry teacher."),
            (day(2023, 9), "Ama works at a museum as a curator."),
        ),
    ),
    History(
        "ama",
        "What car does Ama drive?",
        (
            (day(2012, 6), "Ama drives an old white pickup car."),
            (day(2016, 10), "Ama drives a blue family minivan car."),
            (day(2020, 2), "Ama drives a red sports coupe car."),
            (day(2022, 12), "Ama drives a silver hybrid saloon car."),
        ),
    ),
    History(
        "ama",
        "What is Ama's phone number?",
        (
            (day(2013, 1), "Ama's phone number is 0720 116 338."),
            (day(2017, 4), "Ama's phone number is 0745 903 217."),
            (day(2021, 7), "Ama's phone number is 0731 664 850."),
        ),
    ),
)
Ask = Callable[..., str]
#: How far around a change point the checks look.
JUST = timedelta(days=2)


def tell_out_of_order(memory: MemoryClient, histories: tuple[History, ...]) -> dict[str, str]:
    """Store every value in a shuffled order with its effective time, then record each
    change as a correction of the value before it; node ids by content."""
    told = [(h, when, text) for h in histories for when, text in h.values]
    random.Random(30).shuffle(told)
    nodes: dict[str, str] = {}
    for history, when, text in told:
        event_id = memory.store(text, user_id=history.person, occurred_at=when)
        [node] = memory.get_event_nodes(event_id, user_id=history.person)
        nodes[text] = str(node.id)
    for history in histories:
        texts = [text for _, text in history.values]
        for old, new in itertools.pairwise(texts):
            memory.supersede(nodes[old], nodes[new], user_id=history.person)
    return nodes


def first(memory: MemoryClient, history: History, **when: object) -> str:
    """The content of the first memory retrieved for the history's question."""
    found = memory.retrieve(history.question, user_id=history.person, limit=3, **when)  # type: ignore[arg-type]
    return found.results[0].node.content if found.results else "(nothing)"


def wrong_answers(
    memory: MemoryClient, histories: tuple[History, ...], ask: Ask = first
) -> list[str]:
    """Every wrong answer: as of just before and just after each change point, now,
    and before anything was true; checks twice as many as the values told."""
    wrong: list[str] = []
    checks = 0
    for history in histories:
        values = history.values
        for (_, before), (changed, after) in itertools.pairwise(values):
            for moment, expected in ((changed - JUST, before), (changed + JUST, after)):
                checks += 1
                got = ask(memory, history, as_of=moment)
                if got != expected:
                    wrong.append(f"{history.question} as of {moment:%Y-%m-%d}: {got!r}")
        checks += 1
        current = ask(memory, history)
        if current != values[-1][1]:
            wrong.append(f"{history.question} now: {current!r}")
        checks += 1
        earliest = values[0][0] - JUST
        if ask(memory, history, as_of=earliest) in {text for _, text in values}:
            wrong.append(f"{history.question} before anything was true: answered")
    assert checks == 2 * sum(len(h.values) for h in histories)
    return [f"{len(wrong)} wrong of {checks}", *wrong] if wrong else []


def test_every_change_point_answers_the_value_of_its_side(memory: MemoryClient) -> None:
    tell_out_of_order(memory, HISTORIES)
    assert wrong_answers(memory, HISTORIES) == []


def shuffled(histories: tuple[History, ...], seed: int) -> list[tuple[History, datetime, str]]:
    told = [(h, when, text) for h in histories for when, text in h.values]
    random.Random(seed).shuffle(told)
    return told


@pytest.mark.parametrize("seed", [30, 31])
def test_item_revisions_told_out_of_order_answer_each_side(memory: MemoryClient, seed: int) -> None:
    """No corrections from the caller: each value is a revision of the item its
    question names, put in a shuffled order with its effective time."""
    for history, when, text in shuffled(HISTORIES, seed):
        memory.put_item(history.question, text, user_id=history.person, occurred_at=when)

    assert wrong_answers(memory, HISTORIES) == []
    for history in HISTORIES:  # the item's current value is the one in effect now
        item = memory.get_item(history.question, user_id=history.person)
        assert item is not None
        assert item.current.content == history.values[-1][1]
    for person in {h.person for h in HISTORIES}:
        for name, (live, fresh) in memory.replay_comparison(user_id=person).items():
            assert live == fresh, name


def test_langgraph_values_told_out_of_order_answer_each_side(memory: MemoryClient) -> None:
    from oblivio.integrations.langgraph import OblivioStore

    store = OblivioStore(memory, user_segment=0)
    histories = HISTORIES[:4]
    for history, when, text in shuffled(histories, 32):
        value = {"text": text, "occurred_at": when.isoformat()}
        store.put((history.person, "facts"), history.question, value, index=["text"])

    assert wrong_answers(memory, histories) == []
    item = store.get(("noor", "facts"), HISTORIES[0].question)
    assert item is not None
    assert item.value["text"] == HISTORIES[0].values[-1][1]


#: Histories told as messages: the first value, then each change as a correction that
#: names the value it replaces (the claim rules retire only what a correction names).
MESSAGES = (
    History(
        "sam",
        "Where do I live?",
        (
            (day(2014, 5), "I live in Utrecht."),
            (day(2017, 3), "I moved from Utrecht to Ghent."),
            (day(2020, 9), "I moved from Ghent to Tallinn."),
            (day(2023, 1), "I moved from Tallinn to Valencia."),
        ),
    ),
    History(
        "sam",
        "Which text editor do I use?",
        (
            (day(2015, 2), "I use Vim."),
            (day(2018, 8), "I switched from Vim to Emacs."),
            (day(2021, 4), "I switched from Emacs to Helix."),
        ),
    ),
    History(
        "sam",
        "Where do I work?",
        (
            (day(2016, 6), "I work at the library."),
            (day(2019, 11), "I no longer work at the library."),
        ),
    ),
)


def first_claim(memory: MemoryClient, history: History, **when: object) -> str:
    """The first claim retrieved, as its message says it (its evidence is the message)."""
    found = memory.retrieve(
        history.question,
        user_id=history.person,
        limit=3,
        exclude_node_types={NodeType.NOTE, NodeType.ENTITY},
        **when,  # type: ignore[arg-type]
    )
    return found.results[0].node.content + "." if found.results else "(nothing)"


@pytest.mark.parametrize("seed", [30, 33])
def test_messages_ingested_out_of_order_answer_each_side(memory: MemoryClient, seed: int) -> None:
    for history, when, text in shuffled(MESSAGES, seed):
        memory.ingest(
            text,
            user_id=history.person,
            occurred_at=when,
            first_person_owner=True,
            wait_for_extraction=True,
        )

    assert wrong_answers(memory, MESSAGES, first_claim) == []
    for name, (live, fresh) in memory.replay_comparison(user_id="sam").items():
        assert live == fresh, name


def test_a_back_dated_store_never_likely_updates_a_later_memory(memory: MemoryClient) -> None:
    """Effective order decides what may update what: a change told after a later
    state, but effective before it, is no update of it (it would take its rank)."""
    for text in ("Ines keeps basil on the windowsill.", "Ines likes green."):
        memory.store(text, user_id="ines", occurred_at=day(2010, 1))
    memory.store("I paddle a red kayak on the river.", user_id="ines", occurred_at=day(2024, 3))
    memory.store("I sold the kayak and row now.", user_id="ines", occurred_at=day(2019, 9))
    question = "How do I get down the river by kayak?"
    found = memory.retrieve(question, user_id="ines", limit=2)  # waits for the detector

    assert [r.components.succession for r in found.results] == [0.0, 0.0]
    assert found.results[0].node.content == "I paddle a red kayak on the river."
    assert all(
        (state := memory.get_assertion_state(r.node.id, user_id="ines")) is not None
        and state.likely_updated_by is None
        for r in found.results
    )


def test_without_as_of_nothing_changes(memory: MemoryClient) -> None:
    tell_out_of_order(memory, HISTORIES[:1])
    history = HISTORIES[0]

    now = memory.retrieve(history.question, user_id="noor")
    everything = memory.retrieve(history.question, user_id="noor", include_superseded=True)

    assert [r.node.content for r in now.results] == [history.values[-1][1]]
    assert len(everything.results) == len(history.values)


def test_as_of_admits_what_was_valid_then_even_if_retired_or_archived_since(
    memory: MemoryClient,
) -> None:
    history = HISTORIES[0]
    nodes = tell_out_of_order(memory, (history,))
    (_, first_home), (second_move, second_home) = history.values[:2]
    memory.context.clock = lambda: second_move + timedelta(days=400)

    then = memory.retrieve(history.question, user_id="noor", as_of=second_move - JUST)
    assert [r.node.content for r in then.results] == [first_home]
    node = then.results[0].node
    assert node.valid_to == second_move
    assert str(node.superseded_by) == nodes[second_home]
    # Recency as it was at that moment, not today (45 days: the default half-life
    # stretched by the default salience).
    age_days = (second_move - JUST - node.occurred_at).total_seconds() / 86_400
    assert then.results[0].components.recency == pytest.approx(2 ** (-age_days / 45), rel=1e-3)


def test_include_superseded_as_of_adds_what_was_retired_by_then(memory: MemoryClient) -> None:
    history = HISTORIES[0]
    tell_out_of_order(memory, (history,))
    moment = history.values[2][0] + JUST

    found = memory.retrieve(history.question, user_id="noor", as_of=moment, include_superseded=True)

    assert {r.node.content for r in found.results} == {text for _, text in history.values[:3]}


def test_the_node_listing_and_assertion_state_answer_as_of(memory: MemoryClient) -> None:
    history = HISTORIES[3]  # Tomasz's phone numbers
    nodes = tell_out_of_order(memory, (history,))
    (_, first_phone), (change, second_phone) = history.values[:2]

    listed = memory.list_nodes(user_id="tomasz", as_of=change - JUST)
    assert [n.content for n in listed.nodes] == [first_phone]
    listed = memory.list_nodes(user_id="tomasz", as_of=change + JUST)
    assert [n.content for n in listed.nodes] == [second_phone]

    then = memory.get_assertion_state(nodes[first_phone], user_id="tomasz", as_of=change - JUST)
    assert then is not None
    assert then.current
    assert then.superseded_by is None
    later = memory.get_assertion_state(nodes[first_phone], user_id="tomasz", as_of=change)
    assert later is not None
    assert not later.current
    assert str(later.superseded_by) == nodes[second_phone]
    before = history.values[0][0] - JUST
    assert memory.get_assertion_state(nodes[first_phone], user_id="tomasz", as_of=before) is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"as_of": datetime(2020, 1, 1)}, "as_of must be a timezone-aware date and time"),
        ({"as_of": "then"}, "as_of must be an ISO 8601 date and time"),
        (
            {"occurred_since": day(2021, 1), "occurred_until": day(2020, 1)},
            "occurred_since must be before occurred_until",
        ),
        ({"occurred_until": datetime(2020, 1, 1)}, "occurred_until must be a timezone-aware"),
        ({"meta": {"tags": ["a", "b"]}}, "the meta filter's 'tags' must be a string"),
        ({"meta": {"weight": float("nan")}}, "the meta filter's 'weight' must be finite"),
        ({"meta": ["source"]}, "the meta filter must be an object with string keys"),
    ],
)
def test_bad_time_and_filter_input_is_a_typed_error(
    memory: MemoryClient, fields: dict[str, object], message: str
) -> None:
    memory.store("Noor likes figs.", user_id="noor")
    version = memory.get_events(user_id="noor")[-1].version
    with pytest.raises(InvalidInputError, match=message):
        memory.retrieve("figs", user_id="noor", **fields)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=message):
        memory.list_nodes(user_id="noor", **fields)  # type: ignore[arg-type]
    assert memory.get_events(user_id="noor")[-1].version == version  # nothing written


def test_an_unknown_person_as_of_anything_has_nothing(memory: MemoryClient) -> None:
    found = memory.retrieve("anything", user_id=f"nobody-{uuid.uuid4()}", as_of=day(2020, 1))
    assert found.results == []
