"""The access log's lines are written by a thread of their own, not on the event loop.

Written on the loop, each line's write let go of the GIL and left the loop queueing
behind the thread pool's stores to take it back (oblivio/http/log_writer.py).
"""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator

import pytest

from oblivio.cli_ops import _log_config
from oblivio.http import log_writer
from oblivio.http.log_writer import LineWriterHandler


class RecordingStream(io.StringIO):
    """A stream that remembers which threads wrote to it."""

    def __init__(self) -> None:
        super().__init__()
        self.writers: set[str] = set()

    def write(self, text: str) -> int:
        self.writers.add(threading.current_thread().name)
        return super().write(text)


@pytest.fixture
def stream() -> RecordingStream:
    return RecordingStream()


@pytest.fixture
def logger(stream: RecordingStream) -> Iterator[logging.Logger]:
    handler = LineWriterHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log = logging.getLogger(f"tests.log_writer.{id(stream)}")
    log.propagate = False
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    yield log
    log.removeHandler(handler)
    handler.close()


def test_lines_are_written_in_order_off_the_emitting_thread(
    logger: logging.Logger, stream: RecordingStream
) -> None:
    for n in range(500):
        logger.info(json.dumps({"n": n}))
    for handler in logger.handlers:
        handler.flush()
    lines = stream.getvalue().splitlines()
    assert [json.loads(line)["n"] for line in lines] == list(range(500))
    assert stream.writers, "nothing was written"
    assert threading.current_thread().name not in stream.writers, stream.writers


def test_closing_writes_what_was_emitted_before(stream: RecordingStream) -> None:
    handler = LineWriterHandler(stream)
    log = logging.getLogger("tests.log_writer.closing")
    log.propagate = False
    log.addHandler(handler)
    try:
        log.warning("the last line")
    finally:
        log.removeHandler(handler)
        handler.close()
    assert stream.getvalue() == "the last line\n"


def test_oblivio_serve_writes_access_lines_through_it() -> None:
    logging_config = _log_config()
    handler = logging_config["loggers"]["oblivio.access"]["handlers"][0]
    assert logging_config["handlers"][handler]["class"] == (
        f"{LineWriterHandler.__module__}.{LineWriterHandler.__qualname__}"
    )


class StalledStream(RecordingStream):
    """A stream whose reader stopped: every write waits until ``go`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()
        self.entered = threading.Event()  # the writer is inside a write

    def write(self, text: str) -> int:
        self.entered.set()
        self.go.wait()
        return super().write(text)


def test_lines_wait_for_a_stalled_stream_up_to_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the bound, logging waits for the writer rather than growing without end."""
    monkeypatch.setattr(log_writer, "MAX_WAITING", 3)
    stream = StalledStream()
    handler = LineWriterHandler(stream)
    record = logging.makeLogRecord({"msg": "a line"})
    handler.handle(record)
    assert stream.entered.wait(5), "the writer never took the first line"
    for _ in range(3):
        handler.handle(record)
    blocked = threading.Thread(target=handler.handle, args=(record,))
    blocked.start()
    blocked.join(0.2)
    assert blocked.is_alive(), "a fifth line was queued past the bound"
    stream.go.set()
    blocked.join(5)
    handler.close()
    assert stream.getvalue() == "a line\n" * 5
