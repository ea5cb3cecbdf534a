"""An optional claim extractor that asks an OpenAI-compatible chat endpoint.

Off by default (``OBLIVIO_CLAIM_EXTRACTOR=openai-chat`` turns it on).  It
requests structured output in the plan's JSON schema, and whatever comes
back is validated against that schema and against the message (every claim
grounded in it) before the worker writes anything; a reply that fails is
recorded as a failed, empty plan.  Transport failures raise
``OperationalError``, so the worker retries the batch later.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from eventstore.errors import OperationalError
from projections.claims.plan import (
    ClaimDraft,
    IngestionPlan,
    InvalidPlanError,
    Message,
    validate_plan,
)

DEFAULT_TIMEOUT_SECONDS = 30.0
_INSTRUCTIONS = (
    "Extract the claims a message makes about its speaker, as JSON: an object with a "
    "'claims' list. Each claim names the subject (first_person or first_person_plural), "
    "a predicate, the object as written in the message, polarity, modality, "
    "temporal_intent ('update' for a change such as 'no longer' or 'switched from'), "
    "replaces_object only when the message names what was replaced, any conditions, "
    "memory_type, the character offsets evidence_start/evidence_end of the sentence "
    "that states it, and rule='chat'. Return an empty list when there are none."
)


class ChatClaimExtractor:
    """Claims from a chat model with structured output (see the module docstring)."""

    name = "oblivio.chat"
    version = 1

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout = timeout

    def plan(self, message: Message) -> IngestionPlan:
        reply = self._complete(message)
        try:
            content = reply["choices"][0]["message"]["content"]
            claims = json.loads(content)["claims"]
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise InvalidPlanError("the chat reply holds no JSON object with claims") from e
        raw = {
            "extractor": self.name,
            "extractor_version": self.version,
            "rules": [f"model:{self.model}"],
            "claims": claims,
        }
        return validate_plan(raw, message)

    def _complete(self, message: Message) -> Any:
        schema = {
            "type": "object",
            "properties": {"claims": {"type": "array", "items": ClaimDraft.model_json_schema()}},
            "required": ["claims"],
        }
        body = {
            "model": self.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": _INSTRUCTIONS},
                {
                    "role": "user",
                    "content": json.dumps({"text": message.text, "role": message.role}),
                },
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "ingestion_plan", "schema": schema},
            },
        }
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(  # noqa: S310 - the operator configures the URL
            self.url, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                return json.loads(response.read())
        except (urllib.error.URLError, TimeoutError, ValueError) as e:
            raise OperationalError(f"the claim extractor endpoint failed: {e}") from e
