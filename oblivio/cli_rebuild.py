"""``oblivio rebuild vectors``: start a re-embedding job and work on it, with progress;
``oblivio rebuild graphs``: rebuild the node graphs an upgrade marked, all at once."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import click

from oblivio.cli_support import embedder_name, friendly_errors, settings_from

if TYPE_CHECKING:  # imported by the command itself: see oblivio.cli on start-up time
    from oblivio.memory.context import MemoryContext
    from workers.reembed import RebuildProgress

POLL_SECONDS = 0.5


@click.group()
def rebuild() -> None:
    """Rebuild derived state."""


@rebuild.command("vectors")
@click.option("--user", "user_id", default=None, help="Re-embed only this user's memories.")
@click.option("--all", "every_subject", is_flag=True, help="Re-embed every subject.")
@click.option(
    "--embedder",
    "target",
    default=None,
    callback=embedder_name,
    help="Embedder to move the store to (needs --all); default: the store's own.",
)
@click.option("--detach", is_flag=True, help="Start the job and return; the workers do it.")
@click.pass_context
@friendly_errors
def rebuild_vectors(
    ctx: click.Context, user_id: str | None, every_subject: bool, target: str | None, detach: bool
) -> None:
    """Re-embed the vector state, blue/green per subject (several workers may share it)."""
    from oblivio.bootstrap import open_memory
    from oblivio.memory.vector_rebuilds import start_vector_rebuild

    if (user_id is None) == (not every_subject):
        raise click.UsageError("give exactly one of --user ID and --all")
    # This process works with the store's embedder whatever OBLIVIO_EMBEDDER says:
    # an operator who already set the new name must still be able to move the store.
    settings = settings_from(ctx).with_embedder(None)
    memory = open_memory(settings)
    try:
        started = start_vector_rebuild(memory, embedder=target, user_id=user_id, actor_id="cli")
        click.echo(
            f"vector rebuild {started.rebuild_id}: {started.subjects_total} subjects, "
            f"{started.nodes_total} nodes to re-embed with {started.embedder}"
            # The job counts only nodes that already have another embedder's vector:
            # memories the vector projection has not embedded yet get the target's
            # vector from it, and an operator seeing "0" must not think they were missed.
            " (memories not embedded yet get its vector from the vector projection)"
        )
        if not detach:
            finished = _work_with_progress(memory, started)
            click.echo(
                f"{finished.status}: {finished.nodes_embedded} nodes embedded, "
                f"{finished.subjects_done}/{finished.subjects_total} subjects switched"
            )
            if finished.status != "done":
                raise click.ClickException(finished.last_error or "the rebuild did not finish")
    finally:
        memory.store.close()


@rebuild.command("graphs")
@click.pass_context
@friendly_errors
def rebuild_graphs(ctx: click.Context) -> None:
    """Rebuild now every node graph an upgrade marked (effective times, item rows …).

    Each marked person's graph is rebuilt from the log in a transaction of its
    own; rerunning it after an interruption resumes, and with nothing marked it
    does nothing.
    """
    from oblivio.bootstrap import open_memory
    from oblivio.memory.backfills import backfill_marked, marked_count

    memory = open_memory(settings_from(ctx))
    try:
        total = marked_count(memory)
        with click.progressbar(length=total, label="rebuilding graphs", show_pos=True) as bar:
            rebuilt = backfill_marked(memory, lambda _: bar.update(1))
        click.echo(f"{rebuilt} node graphs rebuilt; {marked_count(memory)} still marked")
    finally:
        memory.store.close()


def _work_with_progress(memory: MemoryContext, started: RebuildProgress) -> RebuildProgress:
    """Work on the job in a thread while the bar shows the progress of every worker on it."""
    from oblivio.memory.vector_rebuilds import vector_rebuild

    stop = threading.Event()
    worker = threading.Thread(
        target=memory.reembedder.run_forever, args=(stop, 0.2), name="vector-rebuilder"
    )
    worker.start()
    began, current = time.monotonic(), started
    try:
        with click.progressbar(
            length=max(started.nodes_total, 1),
            label="re-embedding",
            show_eta=True,
            show_pos=True,
            item_show_func=lambda rate: rate,
        ) as bar:
            while current.status == "running" and worker.is_alive():
                time.sleep(POLL_SECONDS)
                current = vector_rebuild(memory, started.rebuild_id)
                rate = current.nodes_embedded / max(time.monotonic() - began, 1e-9)
                bar.current_item = f"{rate:,.0f} nodes/s"
                bar.update(current.nodes_embedded - bar.pos)
    finally:
        stop.set()
        worker.join()
    return vector_rebuild(memory, started.rebuild_id)
