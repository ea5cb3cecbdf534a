"""What every benchmark run is told: the backend, how many rounds, the size, the server."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from oblivio_bench.systems import BenchError

DEFAULT_SERVER_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
BACKENDS = ("sqlite", "postgres")
#: A Citus cluster the run starts (oblivio_bench.citus), measured beside the server of
#: ``server_url`` in the same run: only benchmarks that compare the two take it.
CITUS = "citus"
WITH_CITUS = (*BACKENDS, CITUS)


def check_backend(backend: str, backends: tuple[str, ...] = BACKENDS) -> None:
    if backend not in backends:
        raise BenchError(f"backend must be one of {', '.join(backends)}")


@dataclass(frozen=True)
class RunConfig:
    """The settings every benchmark shares; each benchmark's config adds its own."""

    #: The backends this benchmark runs on.
    backends: ClassVar[tuple[str, ...]] = BACKENDS

    backend: str = "sqlite"
    rounds: int = 5
    #: Multiplies the benchmark's counts (e.g. 0.05 for a smoke run).
    scale: float = 1.0
    #: PostgreSQL server on which scratch databases are created and dropped.
    server_url: str = DEFAULT_SERVER_URL

    def __post_init__(self) -> None:
        check_backend(self.backend, self.backends)
        if self.rounds < 1 or self.scale <= 0:
            raise BenchError("rounds must be at least 1 and scale above 0")
