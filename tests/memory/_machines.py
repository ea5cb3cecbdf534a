"""What the memory tests' Hypothesis state machines share: a store of their own, the
check at teardown, and how they are run."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from oblivio import MemoryClient
from oblivio.settings import Settings


class StoreMachine(RuleBasedStateMachine):
    """Rules over a fresh embedded store in a temporary directory of its own.

    At teardown ``final_check`` runs, unless a step failed (its failure must not be
    hidden), and then the store is closed and its directory removed."""

    prefix = "oblivio-stateful-"

    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix=self.prefix))
        self.client = MemoryClient(settings=Settings(data_dir=self.directory))

    def final_check(self) -> None:
        """What must hold once the steps are done."""

    def teardown(self) -> None:
        try:
            if sys.exc_info()[0] is None:  # do not hide the failure of a step
                self.final_check()
        finally:
            self.client.close()
            shutil.rmtree(self.directory, ignore_errors=True)


def run_machine(
    machine: type[RuleBasedStateMachine],
    *,
    examples: int,
    steps: int,
    health_checks: tuple[HealthCheck, ...] = (HealthCheck.too_slow,),
) -> None:
    """Run ``machine`` as a test, ``examples`` runs of up to ``steps`` steps.

    Derandomized, so that the coverage checks after a run do not depend on luck;
    no example database; no shrinking: a failure is reported as found (shrinking
    can take minutes)."""
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.reuse, Phase.generate],
            suppress_health_check=list(health_checks),
        ),
    )
