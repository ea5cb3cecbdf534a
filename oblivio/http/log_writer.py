"""The access log's handler: its lines written to a stream by a thread of its own.

``RequestLog`` (``oblivio/http/app.py``) logs one JSON line per request on the
event loop.  A ``StreamHandler`` writes each line there, a system call that lets go
of the GIL, after which the loop queues behind the thread pool's stores to take it
back: while it waits, no request is read, routed or answered.  Written there, the
access line cost ``POST /v1/events`` at 8 clients about a fifth of its requests a
second (docs/benchmarks.md, benchmarks/http_server_ab.py).  This handler leaves the
loop only formatting the record and putting the line on a queue; its writer thread
writes the lines gathered over a few milliseconds in one call (the logging cookbook's
"dealing with handlers that block", which ``QueueListener`` does one record at a time).
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
import time
from typing import TextIO

#: Seconds ``flush`` and ``close`` wait for the writer at most: a stuck stream must
#: not hang the server's shutdown.
WAIT_SECONDS = 5.0

#: Put on the queue by ``close``: the writer writes what came before, then ends.
_STOP = object()
#: Seconds the writer lets lines gather after the first before it writes them.  Every
#: time the writer wakes it takes the GIL, from the loop as often as not: woken for
#: each line, it cost the loop as much as the writes it took over.  At most a
#: hundred wakes a second, each line on the stream within about this long.
GATHER_SECONDS = 0.01
#: Lines waiting at most; past that, logging waits for the writer (as a
#: ``StreamHandler`` waits for its stream), so a stream that stopped reading cannot
#: grow the process without bound.
MAX_WAITING = 10_000


class LineWriterHandler(logging.Handler):
    """Writes each formatted record as a line to ``stream`` (standard error by default)
    from a writer thread, in the order the records were emitted."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__()
        self.stream = sys.stderr if stream is None else stream
        self._queue: queue.Queue[object] = queue.Queue(MAX_WAITING)
        self._writer = threading.Thread(
            target=self._write_lines, name="oblivio-log-writer", daemon=True
        )
        self._writer.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._queue.put(self.format(record))
        except Exception:
            self.handleError(record)

    def flush(self) -> None:
        """Return once every line emitted before this call is written."""
        if threading.current_thread() is self._writer or not self._writer.is_alive():
            return
        written = threading.Event()
        self._queue.put(written)
        written.wait(WAIT_SECONDS)

    def close(self) -> None:
        """Write the lines emitted so far, then stop the writer (``logging.shutdown``
        calls this at exit)."""
        if self._writer.is_alive():
            self._queue.put(_STOP)
            self._writer.join(WAIT_SECONDS)
        super().close()

    def _write_lines(self) -> None:
        while True:
            gathered = [self._queue.get()]  # waits for the next line
            time.sleep(GATHER_SECONDS)
            while True:
                try:
                    gathered.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            lines = [f"{item}\n" for item in gathered if isinstance(item, str)]
            if lines:
                self._write("".join(lines))
            for item in gathered:
                if isinstance(item, threading.Event):
                    item.set()
            if _STOP in gathered:
                return

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            # A closed or failing stream: dropping log lines must not end the writer,
            # or every later flush would wait for nothing.  StreamHandler would report
            # it on that same standard error.
            pass
