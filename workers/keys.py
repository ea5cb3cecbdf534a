"""KEK rotation: new version on schedule, re-wrap every live data key, retire old versions.

Retiring a version deletes its key material.  From then on, any copy of a
data key wrapped under it (a backup, a WAL segment, a dead row) is useless,
which is the date a forget certificate's residual-copy statement names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from eventstore import EventStore, KeyringFile
from eventstore.keys import KekRecord
from eventstore.rewrap import versions_in_use
from workers.policy import KeyPolicy

REWRAP_BATCH = 500


@dataclass(frozen=True)
class RotationReport:
    rotated_to: int | None
    rewrapped: int
    retired: list[int]

    def __bool__(self) -> bool:
        """Whether the pass changed anything (a pass that did nothing is not worth a log line)."""
        return self.rotated_to is not None or self.rewrapped > 0 or bool(self.retired)


def rewrap_all(store: EventStore) -> int:
    """Re-wrap every data key under the active KEK, in batches; how many."""
    total = 0
    while True:
        with store.transaction() as tx:
            done = tx.rewrap_data_keys(REWRAP_BATCH)
        total += done
        if done < REWRAP_BATCH:
            return total


def rotate_keks(
    store: EventStore, keyring: KeyringFile, policy: KeyPolicy, clock: Callable[[], datetime]
) -> RotationReport:
    """One pass of the rotation schedule (safe to run often; idempotent)."""
    now = clock()
    records = keyring.kek_records()
    active = next(r for r in records if r.version == keyring.active_kek_version)
    rotated_to = keyring.rotate(now) if now - active.created_at >= policy.rotate_every else None
    rewrapped = rewrap_all(store)
    with store.reading() as view:
        in_use = versions_in_use(view.connection)
    retired = []
    for record in keyring.kek_records():
        successor = _successor(keyring, record.version)
        due = successor is not None and now - successor.created_at >= policy.retire_after
        if record.key is not None and due and record.version not in in_use:
            keyring.retire(record.version, now)
            retired.append(record.version)
    return RotationReport(rotated_to, rewrapped, retired)


def _successor(keyring: KeyringFile, version: int) -> KekRecord | None:
    later = [r for r in keyring.kek_records() if r.version > version]
    return min(later, key=lambda r: r.version) if later else None
