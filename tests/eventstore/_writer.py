"""A writer process for the concurrency and durability tests.

Run as a script (``python tests/eventstore/_writer.py MODE …``); each process
opens its own :class:`EventStore` on the given URL with a
:class:`KeyringFile` at the given path, so processes share keys but nothing
else.

``burst``    prints ``ready``, waits for a line on stdin, then appends
             ``--count`` single-event transactions to streams of the given
             subjects, writing one JSON line per *acknowledged* append to
             ``--acks`` (flushed each time), and prints ``done``.
``forever``  appends single-event transactions to one subject until killed,
             printing ``<event id> <n>`` to stdout (flushed) after each append
             returns.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import selectors
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from eventstore import EventStore, KeyringFile, NewEvent, create_backend

NAMESPACE = "default"


def burst_content(writer: int, n: int) -> dict[str, object]:
    return {"writer": writer, "n": n}


def forever_content(n: int) -> dict[str, object]:
    return {"n": n, "text": f"durable-{n}"}


def open_store(url: str, keyring: str) -> EventStore:
    return EventStore(create_backend(url), KeyringFile(keyring))


def burst(args: argparse.Namespace) -> None:
    store = open_store(args.url, args.keyring)
    subjects: list[str] = args.subjects.split(",")
    rng = random.Random(args.writer)
    try:
        store.head(NAMESPACE, subjects[0])  # connect before the start signal
        print("ready", flush=True)
        if sys.stdin.readline().strip() != "go":
            raise SystemExit("no start signal")
        with open(args.acks, "w", encoding="utf-8") as acks:
            for n in range(args.count):
                subject = rng.choice(subjects)
                event = NewEvent("test.burst", burst_content(args.writer, n))
                [recorded] = store.append(NAMESPACE, subject, [event])
                ack = {
                    "id": str(recorded.event_id),
                    "subject": subject,
                    "stream_id": recorded.stream.stream_id,
                    "version": recorded.version,
                    "cursor": str(recorded.cursor),
                }
                acks.write(json.dumps(ack) + "\n")
                acks.flush()
        print("done", flush=True)
    finally:
        store.close()


def forever(args: argparse.Namespace) -> None:
    store = open_store(args.url, args.keyring)
    n = 0
    while True:
        event = NewEvent("test.durable", forever_content(n))
        [recorded] = store.append(NAMESPACE, args.subject, [event])
        print(f"{recorded.event_id} {n}", flush=True)
        n += 1


# -- the test side ------------------------------------------------------------


def start(mode: str, *args: str, stderr_path: Path) -> subprocess.Popen[bytes]:
    """Start this module as a writer process (stdin and stdout are pipes)."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONUNBUFFERED": "1"}
    with open(stderr_path, "wb") as stderr:
        return subprocess.Popen(
            [sys.executable, __file__, mode, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=root,
            env=env,
        )


class LineReader:
    """Reads whole lines from a child's stdout with a deadline, never blocking past it."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.proc = proc
        self.fd = proc.stdout.fileno()
        self.buffer = b""
        self.eof = False

    def read_lines(self, count: int, timeout: float) -> list[str]:
        """Exactly ``count`` lines; AssertionError on timeout or end of output."""
        deadline = time.monotonic() + timeout
        lines: list[str] = []
        with selectors.DefaultSelector() as selector:
            selector.register(self.fd, selectors.EVENT_READ)
            while len(lines) < count:
                if b"\n" in self.buffer:
                    line, self.buffer = self.buffer.split(b"\n", 1)
                    lines.append(line.decode())
                    continue
                remaining = deadline - time.monotonic()
                assert not self.eof, f"writer exited after {len(lines)} of {count} lines"
                assert remaining > 0, f"timed out after {len(lines)} of {count} lines"
                if selector.select(remaining):
                    chunk = os.read(self.fd, 65536)
                    self.eof = not chunk
                    self.buffer += chunk
        return lines


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill a writer if it still runs and reap it."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    modes = parser.add_subparsers(dest="mode", required=True)
    b = modes.add_parser("burst")
    b.add_argument("--url", required=True)
    b.add_argument("--keyring", required=True)
    b.add_argument("--writer", type=int, required=True)
    b.add_argument("--subjects", required=True)
    b.add_argument("--count", type=int, required=True)
    b.add_argument("--acks", required=True)
    b.set_defaults(run=burst)
    f = modes.add_parser("forever")
    f.add_argument("--url", required=True)
    f.add_argument("--keyring", required=True)
    f.add_argument("--subject", required=True)
    f.set_defaults(run=forever)
    args = parser.parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()
