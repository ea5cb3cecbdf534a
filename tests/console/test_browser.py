"""The console in a real browser: headless Chromium signs in as each
principal, runs a forget to its certificate, verifies it with WebCrypto in
the page, sees a tampered copy fail and loads nothing from another host.
The screenshots in docs/console.md are taken here."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oblivio.memory import commands, compliance
from tests.console.conftest import SCREENSHOTS, SCREENSHOTS_ENV
from tests.http.conftest import ALICE, World

PAGE_TIMEOUT_MS = 15_000


@pytest.fixture
def browser_page(chromium: Any, live_console: tuple[str, World]) -> Iterator[tuple[Any, list[str]]]:
    """A fresh browser context on the live console, recording every request URL."""
    context = chromium.new_context(viewport={"width": 1000, "height": 720})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    page = context.new_page()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    yield page, requested
    context.close()


def _sign_in(page: Any, base_url: str, token: str) -> None:
    page.goto(f"{base_url}/console")
    page.fill("#api-key", token)
    page.click("#signin")
    page.wait_for_selector(".principal")


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where screenshots go: docs/console/ when OBLIVIO_CONSOLE_SCREENSHOTS=1 (to refresh
    the documentation's pictures), else a temporary directory (taken all the same)."""
    if os.environ.get(SCREENSHOTS_ENV) == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        return SCREENSHOTS
    return tmp_path


def _shot(page: Any, directory: Path, name: str) -> None:
    path = directory / f"{name}.png"
    page.screenshot(path=str(path))
    assert path.stat().st_size > 0


def _only_this_host(requested: list[str], base_url: str) -> None:
    assert requested, "the browser made no request at all"
    foreign = [url for url in requested if not url.startswith(f"{base_url}/")]
    assert not foreign, f"loaded from outside the host: {foreign}"


def test_a_user_forgets_themselves_and_verifies_the_certificate_in_the_browser(
    browser_page: tuple[Any, list[str]], live_console: tuple[str, World], shots: Path
) -> None:
    page, requested = browser_page
    base_url, world = live_console
    commands.store(world.ctx, "Alice drinks green tea every morning", user_id=ALICE)

    _sign_in(page, base_url, world.tokens["user"])
    assert page.url == f"{base_url}/console/my"
    assert "green tea" in page.inner_text("#memories")
    _shot(page, shots, "my-data")

    page.click("#forget-start")
    page.fill("#confirm", "forget me")
    _shot(page, shots, "forget")
    page.click("#forget-confirm")
    page.wait_for_selector("#session-ended")  # the certificate, as the answer to the forget
    check = page.wait_for_selector('#browser-check:not([data-state="pending"])')
    assert check.get_attribute("data-state") == "valid", check.inner_text()
    assert "Valid: signed by issuer key" in check.inner_text()
    assert "1 event(s) erased" in check.inner_text()
    _shot(page, shots, "certificate")

    # A tampered copy: one claim changed, the signature kept.
    original = json.loads(page.input_value("#certificate-input"))
    claims = json.loads(_b64url_decode(original["payload"]))
    claims["erasure"]["events_erased"] = 0
    forged = {**original, "payload": _b64url_encode(json.dumps(claims).encode())}
    page.fill("#certificate-input", json.dumps(forged))
    page.click("#verify-button")
    verdict = page.wait_for_selector('#verdict:not([data-state="pending"])')
    assert verdict.get_attribute("data-state") == "invalid"
    assert "signature does not match" in verdict.inner_text()
    _shot(page, shots, "tampered")

    # The untouched copy still verifies, so the failure above is the tampering.
    page.fill("#certificate-input", json.dumps(original))
    page.click("#verify-button")
    page.wait_for_selector('#verdict[data-state="valid"]')

    # The forget revoked the user's key: the console asks to sign in again.
    page.goto(f"{base_url}/console/my")
    assert page.url == f"{base_url}/console/signin"
    _only_this_host(requested, base_url)


def test_pasted_certificates_fail_naming_why(
    browser_page: tuple[Any, list[str]], live_console: tuple[str, World], shots: Path
) -> None:
    page, requested = browser_page
    base_url, world = live_console
    certificate_id = world.certificate(ALICE)
    certificate = world.client.get(
        f"/v1/compliance/certificates/{certificate_id}", headers=world.headers("auditor")
    ).json()

    unknown_kid = {
        "alg": "Ed25519",
        "kid": "not-a-published-key",
        "typ": "oblivio-forget-certificate+jws",
    }
    _sign_in(page, base_url, world.tokens["auditor"])
    page.goto(f"{base_url}/console/verify")
    cases = {
        "not json": "the certificate is not JSON",
        json.dumps({**certificate, "signature": "A" + certificate["signature"][1:]}): (
            "signature does not match"
        ),
        json.dumps({**certificate, "protected": _b64url_encode(b'{"alg":"none","kid":"x"}')}): (
            'the algorithm "none" is not Ed25519'
        ),
        json.dumps({"payload": certificate["payload"]}): "no 'protected' member",
        json.dumps({**certificate, "signature": "A"}): "the signature is not base64url",
        json.dumps(
            {**certificate, "protected": _b64url_encode(json.dumps(unknown_kid).encode())}
        ): ('the signing key "not-a-published-key" is not among the published issuer keys'),
        json.dumps(certificate): "Valid: signed by issuer key",
    }
    for text, expected in cases.items():
        page.fill("#certificate-input", text)
        page.evaluate("document.getElementById('verdict').dataset.state = 'pending'")
        page.click("#verify-button")
        verdict = page.wait_for_selector('#verdict:not([data-state="pending"])')
        assert expected in verdict.inner_text(), (text[:60], verdict.inner_text())
    _only_this_host(requested, base_url)


def test_operator_and_auditor_pages(
    browser_page: tuple[Any, list[str]], live_console: tuple[str, World], shots: Path
) -> None:
    page, requested = browser_page
    base_url, world = live_console
    world.certificate(ALICE)

    _sign_in(page, base_url, world.tokens["operator"])
    assert page.url == f"{base_url}/console/requests"
    rows = page.query_selector_all("#requests tbody tr[data-status]")
    assert [r.get_attribute("data-status") for r in rows] == ["completed"]
    _shot(page, shots, "requests")
    page.click("#requests tbody a")
    page.wait_for_selector("#certificate-link")
    assert page.inner_text("#request-status") == "completed"
    _shot(page, shots, "request")
    page.goto(f"{base_url}/console/health")
    assert page.query_selector("#certificate-times svg rect.bar") is not None
    _shot(page, shots, "health")
    page.goto(f"{base_url}/console/keys")
    page.select_option("#principal", "auditor")
    page.click("#create-key-button")
    token = page.inner_text("#new-token")
    assert token.startswith("obl_")
    _shot(page, shots, "keys")
    page.goto(f"{base_url}/console/keys")
    assert token not in page.content()  # shown once
    page.click("text=Sign out")
    page.wait_for_url("**/console/signin")

    _sign_in(page, base_url, world.tokens["auditor"])
    assert page.url == f"{base_url}/console/audit"
    assert page.query_selector("#chain-state") is None  # checked on demand, not per view
    page.click("#check-chain")
    assert page.get_attribute("#chain-state", "data-state") == "valid"
    _shot(page, shots, "audit")
    nav = page.inner_text("header nav")
    assert "Keys" not in nav
    assert "My data" not in nav
    # The only form an auditor can post is signing out (the filters only read).
    forms = page.query_selector_all("form")
    assert [f.get_attribute("action") for f in forms if f.get_attribute("method") == "post"] == [
        "/console/signout"
    ]
    page.goto(f"{base_url}/console/my")
    assert "this page is not open to auditor keys" in page.inner_text("#error-detail")
    _only_this_host(requested, base_url)


def _b64url_decode(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64url_encode(raw: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_a_request_page_follows_its_rebuild_jobs_live(
    chromium: Any, console_without_workers: tuple[str, World]
) -> None:
    base_url, world = console_without_workers
    request_id = world.erasure_request(ALICE)  # jobs queued: no worker runs
    context = chromium.new_context()
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        page = context.new_page()
        _sign_in(page, base_url, world.tokens["user"])
        page.goto(f"{base_url}/console/requests/{request_id}")
        assert page.inner_text("#request-status") == "rebuilding"
        assert page.query_selector("#no-certificate") is not None
        assert page.get_attribute("#job-progress", "value") == "0"

        world.ctx.rebuilder.run_once()  # one job done: the page shows it without a reload
        page.wait_for_selector('#job-progress[value="1"]')
        assert "done" in page.inner_text("#jobs")
        while world.ctx.rebuilder.run_once():
            pass
        link = page.wait_for_selector("#certificate-link")  # reloaded once the request is done
        assert page.inner_text("#request-status") == "completed"
        certificate_id = compliance.erasure_status(world.ctx, request_id).certificate_id
        assert link.get_attribute("href") == f"/console/certificates/{certificate_id}"
    finally:
        context.close()
