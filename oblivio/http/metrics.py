"""``GET /metrics``: Prometheus figures of this API process and of the store.

Per route template (never the raw path, which carries user ids): request
counts by status and latencies.  From the store, read at scrape time: how far
each asynchronous projection lags, erasure requests and rebuild jobs by
status, and the open requests past their deadline, labelled with their
namespace.  Each app has its own registry, so several apps in one process
(tests) do not collide.  The route is for operator keys only: the figures say
how much erasure work is going on.  A namespaced operator key gets its
namespace's erasure figures alone; the process's request counts and the
projections' lag, which every namespace shares, only a cluster-wide key.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from oblivio.memory.context import MemoryContext
from oblivio.memory.health import LagReport, erasure_figures

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    """The registry of one app, with what the request log records into it."""

    def __init__(self, ctx: MemoryContext, lag: LagReport) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "oblivio_http_requests",
            "HTTP requests answered, by method, route template and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "oblivio_http_request_duration_seconds",
            "Time to answer an HTTP request, by method and route template",
            ["method", "route"],
            registry=self.registry,
        )
        self.registry.register(StoreCollector(ctx, lag))
        # The children of each (method, route, status), found once: ``labels()`` checks
        # and joins its values under a lock on every call.  As many as the registry holds.
        self._children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        children = self._children.get((method, route, status))
        if children is None:
            children = (
                self.requests.labels(method, route, str(status)),
                self.latency.labels(method, route),
            )
            self._children[method, route, status] = children
        requests, latency = children
        requests.inc()
        latency.observe(seconds)

    def exposition(self, caller: MemoryContext) -> bytes:
        """What ``caller`` may see: everything for a cluster-wide caller, else its
        namespace's store figures alone."""
        if caller.cluster_wide:
            return generate_latest(self.registry)
        tenant = CollectorRegistry()
        tenant.register(StoreCollector(caller, None))
        return generate_latest(tenant)


class StoreCollector(Collector):
    """Figures read from the store when Prometheus scrapes (the lag only with ``lag``)."""

    def __init__(self, ctx: MemoryContext | None, lag: LagReport | None) -> None:
        self.ctx = ctx
        self.lag = lag

    def collect(self) -> Iterator[Metric]:
        if self.ctx is None:  # an app built only to publish its OpenAPI document
            return
        if self.lag is not None:
            yield _gauge(
                "oblivio_projection_lag_events",
                "Events in the log an asynchronous projection has not applied yet",
                ["projection"],
                [((p,), pending) for p, pending in self.lag(self.ctx).items()],
            )
        figures = erasure_figures(self.ctx)
        yield _gauge(
            "oblivio_erasure_requests",
            "Erasure requests by namespace and status",
            ["namespace", "status"],
            figures.requests.items(),
        )
        yield _gauge(
            "oblivio_rebuild_jobs",
            "Rebuild jobs of erasures by namespace and status",
            ["namespace", "status"],
            figures.jobs.items(),
        )
        yield _gauge(
            "oblivio_erasure_requests_overdue",
            "Open erasure requests past their legal deadline, by namespace",
            ["namespace"],
            [((namespace,), count) for namespace, count in figures.overdue.items()],
        )


def _gauge(
    name: str, documentation: str, labels: list[str], values: Iterable[tuple[Sequence[str], int]]
) -> GaugeMetricFamily:
    """A gauge with one sample per label values, in their order."""
    gauge = GaugeMetricFamily(name, documentation, labels=labels)
    for label_values, count in sorted(values, key=lambda sample: tuple(sample[0])):
        gauge.add_metric(list(label_values), count)
    return gauge
