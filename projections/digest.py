"""State digests: SHA-256 over a canonical JSON rendering of projection state.

A digest covers what replaying the log rebuilds, so that a live projection can
be compared with a fresh replay (and certificates can say they were equal).
Retrieval's access counts (``memory_node_access``) are deliberately outside
every digest: no event records a read, so a replay cannot rebuild them, and
they are operational statistics like a cache (they only slow a memory's
fading in the score).  Erasure deletes them with the nodes they count.
What they did decide is inside: an archiving decision is a ``memory.archived``
event, whose recorded after-states the node graph's digest covers.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from datetime import datetime
from typing import Any


def _plain(value: Any) -> Any:
    if isinstance(value, uuid.UUID | datetime):
        return value.isoformat() if isinstance(value, datetime) else str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def state_digest(state: Any) -> str:
    text = json.dumps(_plain(state), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()
