"""The data-protection officer's desk in a real browser (headless Chromium): the
issue's scenario end to end.  An operator looks a person up, serves their access
request and their erasure with references, places and lifts a legal hold,
restricts and lifts; the register shows every request with its deadlines and
outcome; the audit trail filtered by that subject shows each step with the
operator as actor; the certificate and the filtered audit export verify."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from oblivio.memory import commands, compliance
from tests.console.test_browser import _only_this_host, _shot, _sign_in, browser_page, shots
from tests.http.conftest import ALICE, World
from workers.erasure import legal_deadline

__all__ = ["browser_page", "shots"]  # fixtures, used by name


def _act(page: Any, action: str, reference: str, confirm: str, ground: str | None = None) -> None:
    form = f"#{action}-form"
    if ground is not None:
        page.select_option(f"{form} select[name=ground]", ground)
    page.fill(f"{form} input[name=reference]", reference)
    page.fill(f"{form} input[name=confirm]", confirm)
    page.click(f"#{action}-button")
    page.wait_for_selector("#desk-message, #desk-error")


def test_the_dpo_scenario_end_to_end(
    browser_page: tuple[Any, list[str]], live_console: tuple[str, World], shots: Path
) -> None:
    page, requested = browser_page
    base_url, world = live_console
    commands.store(world.ctx, "Alice drinks green tea every morning", user_id=ALICE)
    commands.store(world.ctx, "Alice plays the cello on Sundays", user_id=ALICE)
    _sign_in(page, base_url, world.tokens["operator"])

    # Look the person up.
    page.click("text=People")
    page.fill("#lookup-user", ALICE)
    page.click("#lookup-button")
    subject = page.inner_text("#subject-ref")
    assert subject == world.ctx.store.subject_ref(world.ctx.namespace, ALICE)
    assert ALICE not in page.inner_text("#person")  # shown by reference only
    assert "2" in page.inner_text("#memory-counts")

    # The access request: the signed export, downloaded.
    page.fill("#export-form input[name=reference]", "ACC-2026/1")
    page.fill("#export-form input[name=confirm]", "export")
    with page.expect_download() as download:
        page.click("#export-button")
    exported = json.loads(Path(download.value.path()).read_text())
    compliance.verify_subject_export(exported, compliance.jwks(world.ctx))
    assert len(exported["events"]) == 2

    # A legal hold: the erasure is refused naming its ground, then runs once lifted.
    page.click("#lookup-button")
    _act(page, "hold", "CASE-17", "hold", ground="art17-3-e")
    assert page.get_attribute("#hold-state", "data-held") == "true"
    _act(page, "forget", "ERA-2026/7", "forget")
    assert "art17-3-e" in page.inner_text("#desk-error")
    _shot(page, shots, "people")
    _act(page, "lift-hold", "CASE-17", "lift")
    assert page.get_attribute("#hold-state", "data-held") == "false"

    # Restriction, and its lifting.
    _act(page, "restrict", "RES-3", "restrict", ground="art18-1-a")
    assert page.get_attribute("#restriction-state", "data-restricted") == "true"
    _act(page, "lift-restriction", "RES-3", "lift")
    assert page.get_attribute("#restriction-state", "data-restricted") == "false"

    # The erasure, run again with its reference: to the certificate, verified in the page.
    _act(page, "forget", "ERA-2026/7", "forget")
    page.click("#certificate-link")
    check = page.wait_for_selector('#browser-check:not([data-state="pending"])')
    assert check.get_attribute("data-state") == "valid", check.inner_text()

    # The register: every request, its legal and operational deadlines, its outcome.
    page.click("text=Register")
    rows = page.query_selector_all("#register tbody tr[data-kind]")
    seen = sorted(
        (
            r.get_attribute("data-kind"),
            r.get_attribute("data-status"),
            r.get_attribute("data-reference"),
        )
        for r in rows
    )
    assert seen == [
        ("access", "completed", "ACC-2026/1"),
        ("erasure", "completed", "ERA-2026/7"),
        ("erasure", "refused", "ERA-2026/7"),
        ("restriction", "completed", "RES-3"),
    ]
    expected_deadline = legal_deadline(datetime.now(UTC)).strftime("%Y-%m-%d")
    deadlines = {r.query_selector(".legal-deadline").inner_text()[:10] for r in rows}
    assert deadlines == {expected_deadline}
    outcomes = " ".join(r.query_selector(".outcome").inner_text() for r in rows)
    assert "refused:art17-3-e" in outcomes
    assert "erased" in outcomes
    _shot(page, shots, "register")

    # The audit trail of this subject: each step, the operator as actor.
    page.goto(f"{base_url}/console/audit")
    page.fill("#audit-filters input[name=subject]", subject)
    page.click("#audit-filters button")
    actions = [r.get_attribute("data-action") for r in page.query_selector_all("#audit tbody tr")]
    for step in (
        "subject.export",
        "subject.hold",
        "erasure.refused",
        "subject.lift_hold",
        "subject.restrict",
        "subject.lift_restriction",
        "erasure.forget",
    ):
        assert step in actions, (step, actions)
    operator = world.ctx.store.pseudonym(
        "actor", f"api-key:{world.tokens['operator'].split('_')[1]}"
    )
    actors = {a.get_attribute("title") for a in page.query_selector_all("#audit code.actor")}
    assert operator in actors
    _shot(page, shots, "audit-filtered")
    page.fill("#audit-filters input[name=action]", "subject.hold")
    page.click("#audit-filters button")
    assert [r.get_attribute("data-action") for r in page.query_selector_all("#audit tbody tr")] == [
        "subject.hold"
    ]

    # The filtered export verifies offline: chain links, gap records, signed head.
    page.fill("#audit-filters input[name=action]", "")
    page.click("#audit-filters button")
    with page.expect_download() as download:
        page.click("#audit-export")
    text = Path(download.value.path()).read_text()
    manifest = compliance.verify_audit_export(text, compliance.jwks(world.ctx))
    assert manifest["filters"] == {"subject_ref": subject}
    assert manifest["count"] >= 7
    _only_this_host(requested, base_url)
