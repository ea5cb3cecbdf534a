"""What every benchmark run is told: the backend, how many rounds, the size, the server."""

from __future__ import annotations

from dataclasses import dataclass

from oblivio_bench.systems import BenchError

DEFAULT_SERVER_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
BACKENDS = ("sqlite", "postgres")


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise BenchError(f"backend must be one of {', '.join(BACKENDS)}")


@dataclass(frozen=True)
class RunConfig:
    """The settings every benchmark shares; each benchmark's config adds its own."""

    backend: str = "sqlite"
    rounds: int = 5
    #: Multiplies the benchmark's counts (e.g. 0.05 for a smoke run).
    scale: float = 1.0
    #: PostgreSQL server on which scratch databases are created and dropped.
    server_url: str = DEFAULT_SERVER_URL

    def __post_init__(self) -> None:
        check_backend(self.backend)
        if self.rounds < 1 or self.scale <= 0:
            raise BenchError("rounds must be at least 1 and scale above 0")
