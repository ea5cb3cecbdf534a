"""Telling an operator's endpoint that an erasure request passed its deadline.

A delivery is one JSON POST, signed so the receiver can tell it came from
this store and was not replayed: ``X-Oblivio-Signature: sha256=<hex>`` is
HMAC-SHA256 under the shared secret of ``<X-Oblivio-Timestamp>.<body>``; the
receiver recomputes it and refuses old timestamps.  ``X-Oblivio-Delivery``
stays the same over the retries of one delivery, so a receiver can drop
duplicates.  A connection failure, a 429 or a 5xx is retried with exponential
backoff; any other answer ends the delivery.  The body carries identifiers
and times only: the pseudonymous subject reference, never a user id.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Oblivio-Signature"
TIMESTAMP_HEADER = "X-Oblivio-Timestamp"
DELIVERY_HEADER = "X-Oblivio-Delivery"


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The value of ``X-Oblivio-Signature`` for ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


@dataclass(frozen=True)
class Webhook:
    """A signed, retried JSON POST to ``url``."""

    url: str
    secret: str
    attempts: int = 4
    backoff: float = 0.5  # seconds before the first retry, doubled after each
    timeout: float = 5.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def deliver(self, payload: Mapping[str, Any]) -> bool:
        """POST ``payload``; True once the receiver answered 2xx."""
        body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
        delivery = str(uuid.uuid4())
        for attempt in range(1, self.attempts + 1):
            status = self._post(body, delivery)
            if status is not None and 200 <= status < 300:
                return True
            if status is not None and status != 429 and status < 500:
                log.error("webhook %s refused delivery %s: %s", self.url, delivery, status)
                return False
            if attempt < self.attempts:
                self.sleep(self.backoff * 2 ** (attempt - 1))
        log.error("webhook %s: delivery %s failed %d times", self.url, delivery, self.attempts)
        return False

    def _post(self, body: bytes, delivery: str) -> int | None:
        timestamp = str(int(time.time()))
        request = urllib.request.Request(  # noqa: S310 - the operator configures the URL
            self.url,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                TIMESTAMP_HEADER: timestamp,
                SIGNATURE_HEADER: signature(self.secret, timestamp, body),
                DELIVERY_HEADER: delivery,
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                status: int = response.status
                return status
        except urllib.error.HTTPError as error:
            return error.code
        except (urllib.error.URLError, OSError) as error:
            log.warning("webhook %s unreachable: %s", self.url, error)
            return None
