"""``oblivio archive run``: one pass of the archiving job (selective forgetting), now."""

from __future__ import annotations

import click

from oblivio.cli_support import friendly_errors, settings_from


@click.group()
def archive() -> None:
    """Keep each subject's retrieval tier within OBLIVIO_RETRIEVAL_CAPACITY."""


@archive.command("run")
@click.option("--user", "user_id", default=None, help="Only this user's memories.")
@click.option(
    "--capacity",
    type=click.IntRange(min=1),
    default=None,
    help="Nodes per subject to keep in the retrieval tier (default: OBLIVIO_RETRIEVAL_CAPACITY).",
)
@click.pass_context
@friendly_errors
def archive_run(ctx: click.Context, user_id: str | None, capacity: int | None) -> None:
    """Move each subject's retrieval tier to its CAPACITY best-retained nodes: archive the
    rest, un-archive those that now rank among them (archiving is not erasure: archived
    nodes leave default retrieval but stay readable, exported and erasable)."""
    from oblivio.bootstrap import open_memory
    from oblivio.memory import inputs

    settings = settings_from(ctx)
    if capacity is not None:
        settings = settings.model_copy(update={"retrieval_capacity": capacity})
    if settings.retrieval_capacity == 0:
        raise click.UsageError("archiving is off: set OBLIVIO_RETRIEVAL_CAPACITY or --capacity")
    memory = open_memory(settings)
    try:
        streams = None
        if user_id is not None:
            head = memory.store.head(memory.namespace, inputs.user(user_id))
            streams = set() if head is None else {head.stream.stream_id}
        report = memory.archiver.run(streams)
        click.echo(
            f"archived {report.nodes} nodes of {report.subjects} subjects "
            f"(capacity {settings.retrieval_capacity}); un-archived {report.restored}"
        )
    finally:
        memory.store.close()
