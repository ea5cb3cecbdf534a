"""The rule extractor and the bounded matching rules on their own (no store needed)."""

from __future__ import annotations

import pytest

from projections.claims.matching import target_classes, target_matches
from projections.claims.plan import ClaimDraft, Message, validate_plan
from projections.claims.rules import RuleClaimExtractor


@pytest.mark.parametrize(
    ("target", "prior", "matches"),
    [
        ("insulin pump", "insulin pump", True),
        ("an Insulin Pump", "insulin pump", True),  # articles and case do not matter
        ("pump", "insulin pump", True),
        ("insulin", "insulin pump", True),
        ("old red pump", "very old red pump", True),  # three words inside four
        ("pump", "very old bright red pump", False),  # the object has five words
        ("brush", "toothbrush", False),  # partial words
        ("cats", "2 cats", False),  # numbers are never shortened
        ("2", "2 cats", False),
        ("2 cats", "2 cats", True),  # but match exactly
        ("ID", "ID card", False),  # a shortened word needs three letters
        ("red pump", "pump red", False),  # contiguous, in order
        ("pump", "pump-action", False),
    ],
)
def test_target_matching(target: str, prior: str, matches: bool) -> None:
    assert target_matches(target, prior) is matches


def _draft(predicate: str, memory_type: str = "fact") -> ClaimDraft:
    return ClaimDraft(
        subject="first_person",
        predicate=predicate,  # type: ignore[arg-type]
        object="x",
        polarity="positive",
        modality="asserted",
        temporal_intent="update",
        memory_type=memory_type,  # type: ignore[arg-type]
        evidence_start=0,
        evidence_end=1,
        rule="test",
    )


def test_the_one_bounded_transition() -> None:
    assert target_classes(_draft("switched_to")) == ["switch", "use"]
    assert target_classes(_draft("switched_to", "preference")) == ["switch"]
    assert target_classes(_draft("moved_to")) == ["residence"]
    assert target_classes(_draft("uses")) == ["use"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I use an insulin pump.", [("uses", "insulin pump", "positive", "state", None)]),
        (
            "I don't use an insulin pump anymore.",
            [("uses", "insulin pump", "negative", "update", None)],
        ),
        ("I no longer live in Boston.", [("lives_in", "Boston", "negative", "update", None)]),
        ("I stopped using Vim.", [("uses", "Vim", "negative", "update", None)]),
        ("I don't own a car.", [("owns", "car", "negative", "state", None)]),
        ("I switched from Vim to Emacs.", [("switched_to", "Emacs", "positive", "update", "Vim")]),
        ("I moved to Chicago.", [("moved_to", "Chicago", "positive", "update", None)]),
        ("I work as a nurse.", [("works_as", "nurse", "positive", "state", None)]),
        ("My current city is Boston.", [("is", "Boston", "positive", "state", None)]),
        (
            "I'm a nurse; I live in Oslo.",
            [
                ("am", "nurse", "positive", "state", None),
                ("lives_in", "Oslo", "positive", "state", None),
            ],
        ),
        ("My car is no longer red.", [("is", "red", "negative", "update", None)]),
        (
            "I like green tea, and I have a dog!",
            [
                ("likes", "green tea", "positive", "state", None),
                ("has", "dog", "positive", "state", None),
            ],
        ),
        # Version 2: mine / me / myself.
        ("The blue bike is mine.", [("owns", "blue bike", "positive", "state", None)]),
        ("Those shoes are mine.", [("owns", "Those shoes", "positive", "state", None)]),
        ("The blue bike isn't mine.", [("owns", "blue bike", "negative", "state", None)]),
        ("The car is no longer mine.", [("owns", "car", "negative", "update", None)]),
        ("The house belongs to me.", [("owns", "house", "positive", "state", None)]),
        ("I bought myself a new laptop.", [("has", "new laptop", "positive", "state", None)]),
        ("I got a guitar for myself.", [("has", "guitar", "positive", "state", None)]),
        ("It is mine.", []),  # a bare pronoun names nothing
        ("The pleasure is mine.", []),
        ("I know the bike is mine.", []),  # not an object with a subject of its own
        ("I bought a gift for me.", []),  # outside the listed patterns
        ("I bought ourselves a boat.", []),  # the reflexive must agree
        # Version 3: sentences keep emails, URLs, decimals, times and abbreviations whole.
        (
            "My email is jo.parker@example.com.",
            [("is", "jo.parker@example.com", "positive", "state", None)],
        ),
        (
            "See https://example.org/a.b?x=1. I use Vim.",
            [("uses", "Vim", "positive", "state", None)],
        ),
        (
            "Dr. Mensah is kind. I live in St. Albans.",
            [("lives_in", "St. Albans", "positive", "state", None)],
        ),
        (
            "I paid 3.50 at 9.30 today. I drive a Corsa.",
            [("drives", "Corsa", "positive", "state", None)],
        ),
        (
            "I work at the library, e.g. on Mondays.",
            [("works_at", "library", "positive", "state", None)],
        ),
        ("I work for Acme Ltd. now.", [("works_at", "Acme Ltd.", "positive", "update", None)]),
        # Everyday predicates and ways of saying that something changed.
        ("I'm a paramedic.", [("am", "paramedic", "positive", "state", None)]),
        ("We're vegan.", [("am", "vegan", "positive", "state", None)]),
        ("I'm not vegetarian anymore.", [("am", "vegetarian", "negative", "update", None)]),
        ("I am no longer a student.", [("am", "student", "negative", "update", None)]),
        ("I'm moving house soon.", []),  # a progressive says no role
        ("I'm using Vim.", [("uses", "Vim", "positive", "state", None)]),
        ("I don't eat meat anymore.", [("eats", "meat", "negative", "update", None)]),
        ("I stopped drinking coffee.", [("drinks", "coffee", "negative", "update", None)]),
        ("I used to live in Utrecht.", [("lives_in", "Utrecht", "negative", "update", None)]),
        ("I no longer work at the pottery.", [("works_at", "pottery", "negative", "update", None)]),
        (
            "I moved from Boston to Denver last month.",
            [("moved_to", "Denver", "positive", "update", "Boston")],
        ),
        (
            "We sold the Honda, now we drive a Tesla.",
            [
                ("owns", "Honda", "negative", "update", None),
                ("drives", "Tesla", "positive", "update", None),
            ],
        ),
        (
            "I use Obsidian instead of Evernote.",
            [("uses", "Obsidian", "positive", "update", "Evernote")],
        ),
        (
            "Actually my sister's name is Ana, not Anna.",
            [("is", "Ana", "positive", "update", "Anna")],
        ),
        ("My new number is 720-555-0123.", [("is", "720-555-0123", "positive", "update", None)]),
        ("These days I drink green tea.", [("drinks", "green tea", "positive", "update", None)]),
        (
            "I have 2 cats, a dog and a parrot.",
            [("has", "2 cats, a dog and a parrot", "positive", "state", None)],
        ),
        ("Yo uso una bomba de insulina.", []),  # English only
        ("The weather is nice.", []),
    ],
)
def test_the_rule_extractor(text: str, expected: list[tuple[object, ...]]) -> None:
    plan = RuleClaimExtractor().plan(Message(text=text, role="user"))
    found = [
        (c.predicate, c.object, c.polarity, c.temporal_intent, c.replaces_object)
        for c in plan.claims
    ]
    assert found == expected
    validate_plan(plan.body(), Message(text=text, role="user"))  # its plans are grounded
    assert plan.extractor == "oblivio.rules.en"
    assert plan.rules


def test_conditions_hedges_and_plurals() -> None:
    extractor = RuleClaimExtractor()
    [conditional] = extractor.plan(Message(text="I use the bus when it rains.", role="user")).claims
    assert conditional.conditions == ("when it rains",)
    [hedged] = extractor.plan(Message(text="Maybe I use Vim.", role="user")).claims
    assert hedged.modality == "hypothetical"
    [plural] = extractor.plan(Message(text="We own a boat.", role="user")).claims
    assert plural.subject == "first_person_plural"


@pytest.mark.parametrize(
    ("text", "subject"),
    [
        ("The blue bike is mine.", "first_person"),
        ("The house belongs to me.", "first_person"),
        ("I bought myself a tent.", "first_person"),
        ("I got a tent for myself.", "first_person"),
        ("The blue bike is ours.", "first_person_plural"),
        ("The boat isn't ours.", "first_person_plural"),
        ("The house belongs to us.", "first_person_plural"),
        ("We bought ourselves a tent.", "first_person_plural"),
        ("We got a tent for ourselves.", "first_person_plural"),
    ],
)
def test_mine_me_and_myself_are_singular_ours_us_ourselves_plural(text: str, subject: str) -> None:
    [claim] = RuleClaimExtractor().plan(Message(text=text, role="user")).claims
    assert claim.subject == subject


def test_versions_2_and_3_append_their_rules() -> None:
    plan = RuleClaimExtractor().plan(Message(text="I use Vim.", role="user"))
    assert plan.extractor_version == 3
    third = ("used_to", "not_am_anymore", "not_am", "am", "sold")
    assert plan.rules[-len(third) :] == third
    second = (
        "no_longer_mine",
        "not_mine",
        "is_mine",
        "belongs_to_me",
        "bought_myself",
        "bought_for_myself",
    )
    rules = plan.rules[: -len(third)]
    assert rules[-len(second) :] == second
    assert rules[: -len(second)] == (
        "no_longer",
        "stopped",
        "not_anymore",
        "not",
        "switched",
        "moved",
        "using",
        "now",
        "plain",
        "mine_no_longer",
        "mine_not",
        "mine_now",
        "mine",
    )  # version 1's rules, in their order


def test_the_plan_checksum_covers_its_content() -> None:
    extractor = RuleClaimExtractor()
    one = extractor.plan(Message(text="I use Vim.", role="user"))
    other = extractor.plan(Message(text="I use Emacs.", role="user"))
    assert one.checksum() == extractor.plan(Message(text="I use Vim.", role="user")).checksum()
    assert one.checksum() != other.checksum()
    assert one.saved()["checksum"] == one.checksum()


def test_long_messages_make_bounded_plans() -> None:
    extractor = RuleClaimExtractor()
    many = " ".join(f"I use tool{i}." for i in range(80))
    plan = extractor.plan(Message(text=many, role="user"))
    assert len(plan.claims) == 50
    assert plan.claims[-1].object == "tool49"
    long_object = "I use " + "a" * 300 + "."
    assert extractor.plan(Message(text=long_object, role="user")).claims == ()
