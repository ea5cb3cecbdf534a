"""``oblivio demo``: a guided end-to-end run, printed readably."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

from oblivio.client import MemoryClient
from oblivio.settings import Settings


def run_demo(settings: Settings, say: Callable[[str], object]) -> None:
    """Store, correct, reinforce, retrieve, forget, verify: each step explained."""
    user = f"demo-{uuid.uuid4().hex[:8]}"
    with MemoryClient(settings=settings) as memory:
        where = (settings.database_url and "PostgreSQL") or f"{settings.data_dir} (SQLite)"
        say(f"oblivio demo — store in {where}, user {user}\n")
        boston = memory.store("My current city is Boston.", user_id=user)
        chicago = memory.store("I moved to Chicago.", user_id=user)
        say("1. Stored two memories (each encrypted under the user's own key).")
        old = memory.get_event_nodes(boston, user_id=user)[0]
        new = memory.get_event_nodes(chicago, user_id=user)[0]
        memory.supersede(old.id, new.id, evidence_id=chicago, user_id=user, actor_id=user)
        say(
            "2. Corrected: 'Boston' is superseded by 'Chicago' (kept in history, "
            "left out of retrieval)."
        )
        confirmed = memory.reinforce(new.id, user_id=user, request_id=uuid.uuid4())
        say(
            f"3. Reinforced the new fact: confidence {confirmed.confidence_base:.2f}, "
            f"boost {confirmed.reinforcement_boost:.2f}."
        )
        for hit in memory.retrieve("Which city do I live in now?", user_id=user).results:
            say(f"4. Retrieved: {hit.node.content!r} (score {hit.score:.3f})")
        status = memory.forget(user, wait=True)
        say(
            f"5. Forgot the user: {status.events_erased} events erased, data key destroyed, "
            f"projections rebuilt — request {status.status}."
        )
        if status.certificate is not None:
            claims = memory.verify_certificate(status.certificate, memory.jwks())
            say("6. The signed forget certificate verifies offline against the JWKS:")
            shown = {k: claims[k] for k in ("certificate_id", "issued_at", "erasure")}
            say(json.dumps(shown, indent=2))
        left = memory.retrieve("city", user_id=user).results
        say(f"7. After forgetting, retrieval returns {len(left)} memories.")
