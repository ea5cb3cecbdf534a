"""After forget, no plaintext of the subject is in any node's files: coordinator and workers.

The single-node scan (tests/erasure/test_at_rest_after_forget.py) reads one server's
relation files and WAL.  On the cluster a subject's rows live on a worker's shards,
its stream row on the coordinator, and two-phase commits leave state files on both,
so this reads every file below every node's data directory (relations, every WAL
segment kept since the test began, pg_twophase, pg_xact …) after a CHECKPOINT on each.
A positive control follows: the user id, planted in a table on each node, must then
be found there by the same scan.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from oblivio import MemoryClient
from oblivio_bench.citus import CitusCluster, Node
from tests._at_rest import files_below, scan_files, superuser, wal_kept
from tests.erasure.conftest import make_settings
from tests.erasure.test_at_rest_after_forget import forget_and_certify, imaging, write_subject

pytestmark = pytest.mark.citus


def node_url(node: Node, citus_url: str) -> str:
    return node.url(str(sa.engine.make_url(citus_url).database))


@contextmanager
def wal_kept_on_every_node(citus: CitusCluster, citus_url: str) -> Iterator[None]:
    """No node recycles a WAL segment written from now until the block ends."""
    with ExitStack() as stack:
        for node in citus.nodes:
            admin = stack.enter_context(superuser(node_url(node, citus_url)))
            stack.enter_context(wal_kept(admin))
        yield


def scan(citus: CitusCluster, citus_url: str, needles: list[bytes]) -> dict[str, object]:
    """Needles found below each node's data directory after a CHECKPOINT there."""
    found: dict[str, object] = {}
    for node in citus.nodes:
        with superuser(node_url(node, citus_url)) as admin:
            admin.exec_driver_sql("CHECKPOINT")
        hits = scan_files(files_below(node.data_dir), needles)
        if hits:
            found[node.name] = hits
    return found


def test_no_node_holds_plaintext_of_a_forgotten_subject(
    citus: CitusCluster, citus_url: str, tmp_path: Path
) -> None:
    with wal_kept_on_every_node(citus, citus_url):
        client = MemoryClient(settings=imaging(make_settings(tmp_path, citus_url)))
        try:
            user_id, needles = write_subject(client)
            forget_and_certify(client, user_id)
        finally:
            client.close()
        assert scan(citus, citus_url, needles) == {}

        # Positive control: the user id planted on each node is found on each node.
        for node in citus.nodes:
            with superuser(node_url(node, citus_url)) as admin:
                admin.exec_driver_sql("CREATE TABLE plaintext_control (t text)")
                admin.execute(sa.text("INSERT INTO plaintext_control VALUES (:t)"), {"t": user_id})
        try:
            found = scan(citus, citus_url, [user_id.encode()])
        finally:
            for node in citus.nodes:
                with superuser(node_url(node, citus_url)) as admin:
                    admin.exec_driver_sql("DROP TABLE plaintext_control")
    assert set(found) == {node.name for node in citus.nodes}
