"""``oblivio bench startup``: how long the light commands take, whole process, from outside.

Each round starts ``oblivio --help``, ``oblivio keys list`` on an up-to-date
embedded store, a bare ``python -c pass`` (the interpreter's own floor) and a
``python`` that only imports the libraries ``keys list`` cannot do without
(SQLAlchemy with its SQLite dialect, click, and pydantic building one model:
the floor of any implementation on this stack), in turn, so that a machine whose speed drifts
slows all of them alike.  Wall time is
read around each child; CPU time is the operating system's account of it
(``RUSAGE_CHILDREN``).  The children write their bytecode to a cache of their
own (``PYTHONPYCACHEPREFIX``), warmed before the first timed round: an installed
package has its bytecode compiled by pip, and a source tree run with
``PYTHONDONTWRITEBYTECODE`` would time the compiler instead.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from oblivio_bench.figures import Figure, FigureReport, Section, at_most
from oblivio_bench.report import load_average, machine_info

#: The bound for both commands, wall time.
TARGET_MS = 500.0
WARMUP_ROUNDS = 1
#: What ``keys list`` needs on this stack whatever oblivio does: its floor.  It
#: sets the collector up as the command line does (``oblivio.cli``): the young
#: generation's threshold, and no pass at exit.
LIBRARIES = (
    "import atexit, gc; atexit.register(gc.freeze); "
    "gc.set_threshold(2000, *gc.get_threshold()[1:]); "
    "import sqlalchemy, sqlalchemy.dialects.sqlite, click, pydantic; "
    "pydantic.create_model('Settings', url=(str, ''))"  # pydantic imports its schema code lazily
)


@dataclass(frozen=True)
class Sample:
    wall: float
    cpu: float


@dataclass(frozen=True)
class StartupBenchConfig:
    rounds: int = 11


def oblivio_script() -> str:
    """This interpreter's ``oblivio`` console script (the entry point users run)."""
    beside = Path(sys.executable).with_name("oblivio")
    found = str(beside) if beside.exists() else shutil.which("oblivio")
    if found is None:
        raise RuntimeError("the oblivio console script is not installed")
    return found


def timed(command: Sequence[str], env: Mapping[str, str]) -> Sample:
    """Run ``command`` to its end; its wall and CPU seconds (it must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # The commands are this package's own: the oblivio script and this interpreter.
    subprocess.run(command, env=dict(env), check=True, capture_output=True, timeout=120)  # noqa: S603
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Sample(wall, cpu)


def child_env(scratch: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(
        PYTHONPYCACHEPREFIX=str(scratch / "pycache"),
        OBLIVIO_KEYRING_DIR=str(scratch / "keyrings"),
    )
    for leftover in ("OBLIVIO_DATABASE_URL", "OBLIVIO_KEKS", "OBLIVIO_ISSUER_KEYS"):
        env.pop(leftover, None)
    return env


def commands(scratch: Path) -> dict[str, list[str]]:
    script = oblivio_script()
    return {
        "help": [script, "--help"],
        "keys_list": [script, "--data-dir", str(scratch / "data"), "keys", "list"],
        "python": [sys.executable, "-c", "pass"],
        "libraries": [sys.executable, "-c", LIBRARIES],
    }


def run_startup_bench(
    config: StartupBenchConfig, progress: Callable[[str], None] = lambda _: None
) -> FigureReport:
    """Time the commands round by round, interleaved; medians with the 0.5 s target."""
    machine = machine_info(None)
    samples: dict[str, list[Sample]] = {}
    with tempfile.TemporaryDirectory(prefix="oblivio-bench-startup-") as directory:
        scratch = Path(directory)
        env, runs = child_env(scratch), commands(scratch)
        for _ in range(WARMUP_ROUNDS):  # creates and migrates the store, fills the cache
            for command in runs.values():
                timed(command, env)
        for round_number in range(1, config.rounds + 1):
            for name, command in runs.items():
                samples.setdefault(name, []).append(timed(command, env))
            progress(f"round {round_number}/{config.rounds}")
    machine["load_average_end"] = load_average()
    return FigureReport(
        benchmark="oblivio bench startup",
        backend="sqlite",
        rounds=config.rounds,
        scale=1.0,
        machine=machine,
        parameters={"warmup_rounds": WARMUP_ROUNDS, "commands": list(runs)},
        sections=[startup_section(samples)],
        details={
            name: [{"wall_s": s.wall, "cpu_s": s.cpu} for s in found]
            for name, found in samples.items()
        },
    )


def startup_section(samples: Mapping[str, Sequence[Sample]]) -> Section:
    def median_ms(name: str, of: Callable[[Sample], float]) -> float:
        return 1000 * statistics.median(of(s) for s in samples[name])

    figures = []
    for name, title in (("help", "oblivio --help"), ("keys_list", "oblivio keys list")):
        wall = median_ms(name, lambda s: s.wall)
        figures += [
            Figure(f"{name}_wall_ms", f"{title}: wall", wall, "ms", at_most(TARGET_MS)),
            Figure(f"{name}_cpu_ms", f"{title}: CPU", median_ms(name, lambda s: s.cpu), "ms"),
        ]
    for name, title in (
        ("python", "python -c pass: wall (the interpreter's floor)"),
        ("libraries", "importing SQLAlchemy, pydantic, click: wall (the stack's floor)"),
    ):
        keys_over = statistics.median(
            k.wall / f.wall for k, f in zip(samples["keys_list"], samples[name], strict=True)
        )
        figures += [
            Figure(f"{name}_wall_ms", title, median_ms(name, lambda s: s.wall), "ms"),
            Figure(f"keys_list_over_{name}", f"oblivio keys list / {name}, wall", keys_over, "×"),
        ]
    notes = [
        "medians over rounds; each round runs the four commands in turn (whole process)",
        "keys list: an up-to-date embedded store with one keyring; bytecode cached",
    ]
    return Section("start-up (median of rounds)", figures, notes)
