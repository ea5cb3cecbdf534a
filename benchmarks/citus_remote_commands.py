"""What the coordinator sends to the workers for one subject's operations.

    python benchmarks/citus_remote_commands.py [--memories 20] [--repeats 3]

Starts a coordinator and two workers (``oblivio_bench.citus``, fsync off: counts,
not times), migrates a database, stores ``--memories`` memories of one subject
through ``MemoryClient`` and retrieves once (warm-up).  Then it turns on
``citus.log_remote_commands`` for the database (logged to the coordinator's
server log) and runs each operation ``--repeats`` times, printing the commands
the coordinator issued to workers for each, by kind (``SELECT``, ``INSERT``,
``BEGIN``, ``PREPARE`` …): a ``SELECT`` routed to the subject's shard is one
command, one that reads every shard is one per shard, and ``PREPARE`` means a
two-phase commit.  With ``--shapes`` it also prints the statements of the last
repetition of each operation, numbers masked, by how often each shape was sent.

The operations: ``store()``; ``EventStore.read_stream`` of the subject; a
``store()`` then a consistent ``retrieve`` (which waits for the vector state to
include the store, helping it along); a ``retrieve`` with nothing new.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eventstore import create_backend
from oblivio import MemoryClient
from oblivio.bootstrap import upgrade_schema
from oblivio_bench.citus import citus_cluster

DATABASE = "remote_commands"
SUBJECT = "alice"
_ISSUED = re.compile(r"NOTICE:  issuing (.*)")


def issued(log: Path, operation: Callable[[], object]) -> list[str]:
    """The commands the coordinator logged as issued to workers while ``operation`` ran."""
    start = log.stat().st_size
    operation()
    time.sleep(0.3)  # the server's logger writes asynchronously
    return _ISSUED.findall(log.read_bytes()[start:].decode(errors="replace"))


def shape(command: str) -> str:
    """The command with numbers (shard ids, values) masked, cut to a readable length."""
    return re.sub(r"\d+", "9", command)[:160]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shapes", action="store_true", help="print each statement shape")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, citus_cluster(workers=2, durable=False) as cluster:
        url = cluster.create_database(DATABASE)
        backend = create_backend(url)
        upgrade_schema(backend.engine)
        backend.dispose()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"ALTER DATABASE {DATABASE} SET citus.log_remote_commands = on")
            conn.execute(f"ALTER DATABASE {DATABASE} SET log_min_messages = notice")
        client = MemoryClient(
            tmp, database_url=url.replace("postgresql://", "postgresql+psycopg://")
        )
        for n in range(args.memories):
            client.store(f"note {n} about the garden", user_id=SUBJECT)
        client.retrieve("garden", user_id=SUBJECT)
        client.context.store.backend.dispose()  # new connections: the setting applies
        namespace = client.context.namespace

        def store_then_retrieve() -> None:
            client.store("a note about peppers", user_id=SUBJECT)
            client.retrieve("peppers", user_id=SUBJECT)

        operations: dict[str, Callable[[], object]] = {
            "store()": lambda: client.store("a note about tomatoes", user_id=SUBJECT),
            "read_stream": lambda: client.context.store.read_stream(namespace, SUBJECT),
            "store() then retrieve": store_then_retrieve,
            "retrieve, nothing new": lambda: client.retrieve("peppers", user_id=SUBJECT),
        }
        log = cluster.root / "coordinator.log"
        for name, operation in operations.items():
            for repeat in range(1, args.repeats + 1):
                commands = issued(log, operation)
                kinds = Counter(c.split(" ", 1)[0] for c in commands)
                print(f"{name} #{repeat}: {len(commands)} commands {dict(kinds)}")
            if args.shapes:
                for found, count in Counter(map(shape, commands)).most_common():
                    print(f"    {count:3d} {found}")
        client.close()


if __name__ == "__main__":
    main()
