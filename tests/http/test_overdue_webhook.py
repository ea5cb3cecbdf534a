"""An erasure request past its deadline: one warning, one signed webhook delivery
(retried through a receiver's failure), and nothing more on the next watchdog pass.

The receiver is a real HTTP server on a loopback port that the test starts.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from oblivio.bootstrap import overdue_webhook
from oblivio.memory import compliance
from oblivio.settings import Settings
from tests.http.conftest import ALICE, World
from workers.maintenance import flag_overdue
from workers.scheduler import TASKS, Maintenance
from workers.webhooks import Webhook, signature

SECRET = "s3cret-shared-with-the-receiver"


class Receiver:
    """Answers the first ``failures`` deliveries with 503, then 204; keeps what it got."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.received: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append((dict(self.headers), body))
                failing = len(receiver.received) <= receiver.failures
                self.send_response(503 if failing else 204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/oblivio"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver(failures=2)
    thread = threading.Thread(target=running.server.serve_forever, daemon=True)
    thread.start()
    yield running
    running.server.shutdown()
    thread.join(5)


def test_an_overdue_request_is_reported_once_signed_and_retried(
    world: World, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    seed = world.seed(ALICE)
    status = compliance.delete_event(world.ctx, seed.event_id, user_id=ALICE)  # not waited for
    assert status.status == "rebuilding"
    later = status.deadline_at + timedelta(minutes=1)
    settings = Settings(overdue_webhook_url=receiver.url, overdue_webhook_secret=SECRET)
    configured = overdue_webhook(settings)
    assert configured is not None
    webhook = Webhook(configured.url, configured.secret, backoff=0.01)
    maintenance = Maintenance(
        store=world.ctx.store,
        eraser=world.ctx.eraser,
        retention=[],
        keyring=None,
        key_policy=None,  # type: ignore[arg-type]  # not used by the watchdog
        clock=lambda: later,
        overdue_webhook=webhook,
    )

    assert TASKS["overdue_watchdog"](maintenance) == 1
    assert flag_overdue(world.ctx.store, lambda: later, webhook.deliver) == 0  # once only

    assert len(receiver.received) == 3  # two 503s, then accepted
    deliveries = {headers["X-Oblivio-Delivery"] for headers, _ in receiver.received}
    assert len(deliveries) == 1, "retries of one delivery share its id"
    for headers, body in receiver.received:
        expected = signature(SECRET, headers["X-Oblivio-Timestamp"], body)
        assert hmac.compare_digest(headers["X-Oblivio-Signature"], expected)
    notice = json.loads(receiver.received[-1][1])
    assert notice["event"] == "erasure.overdue"
    assert notice["request_id"] == str(status.request_id)
    assert notice["subject_ref"] == status.subject_ref
    assert ALICE not in receiver.received[-1][1].decode()
    warnings = [r for r in caplog.records if "passed its deadline" in r.getMessage()]
    assert len(warnings) == 1
    assert compliance.erasure_status(world.ctx, status.request_id).overdue


def test_an_unreachable_receiver_is_retried_with_backoff(receiver: Receiver) -> None:
    receiver.failures = 0
    slept: list[float] = []
    webhook = Webhook("http://127.0.0.1:9/nothing-listens", SECRET, sleep=slept.append)
    assert not webhook.deliver({"event": "x"})
    assert slept == [0.5, 1.0, 2.0]  # three retries of an unreachable receiver, backing off
    assert Webhook(receiver.url, SECRET).deliver({"event": "x"})


def test_a_webhook_needs_its_secret() -> None:
    with pytest.raises(ValueError, match="SECRET"):
        Settings(overdue_webhook_url="https://ops.example/hook")
    assert overdue_webhook(Settings()) is None
