"""Running ``oblivio serve`` in a subprocess and reading what it prints."""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from oblivio.settings import Settings
from tests.http.conftest import child_env, free_port, wait_until_healthy

SERVE_START_TIMEOUT = 60.0
SERVE_STOP_TIMEOUT = 20.0
FIRST_KEY = re.compile(r"^\s+(obl_[0-9a-f]+_[A-Za-z0-9_-]+)\s*$")


class ServeProcess:
    """``oblivio serve`` with its output (stdout and stderr) collected by a reader thread."""

    def __init__(self, args: list[str]) -> None:
        self.lines: list[str] = []
        self.first_key = threading.Event()
        self.token: str | None = None
        self.process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=child_env(),
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            match = FIRST_KEY.match(line)
            if match and self.token is None:
                self.token = match.group(1)
                self.first_key.set()

    def output(self) -> str:
        return "".join(self.lines)[-4000:]

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> int:
        """SIGTERM, as a supervisor would; the exit code."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(SERVE_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
                raise AssertionError("oblivio serve ignored SIGTERM") from None
        self._reader.join(5)
        return self.process.returncode


def oblivio_command() -> list[str]:
    """The installed ``oblivio`` console script of this interpreter's environment."""
    installed = Path(sys.executable).with_name("oblivio")
    if installed.exists():
        return [str(installed)]
    found = shutil.which("oblivio")
    assert found, "the oblivio console script is not installed"
    return [found]


@dataclass
class Served:
    base_url: str
    operator_key: str
    process: ServeProcess


@contextlib.contextmanager
def oblivio_serve(settings: Settings) -> Iterator[Served]:
    """Run ``oblivio [--data-dir D] [--database-url U] serve --port N`` until the block ends."""
    port = free_port()
    args = [*oblivio_command(), "--data-dir", str(settings.data_dir)]
    if settings.database_url:
        args += ["--database-url", settings.database_url]
    args += ["serve", "--port", str(port)]
    serve = ServeProcess(args)
    try:
        base_url = f"http://127.0.0.1:{port}"
        wait_until_healthy(base_url, SERVE_START_TIMEOUT, serve.alive)
        assert serve.first_key.wait(5), "oblivio serve printed no first operator key"
        assert serve.token is not None
        yield Served(base_url, serve.token, serve)
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- output of {' '.join(args)} ---\n{serve.output()}") from e
    finally:
        code = serve.stop()
    assert code in (0, -signal.SIGTERM), f"oblivio serve exited with {code}:\n{serve.output()}"
