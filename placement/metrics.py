"""Prometheus metrics of the service (prometheus_client), off unless
``[metrics] enabled``.

Code everywhere records through the functions below, which do nothing
until ``enable`` has run: the object and database layers count their
retries, errors and provider-copy refreshes without knowing whether anyone
collects them, and without any notion of HTTP. The WSGI side (timing the
requests, serving ``GET /metrics``) is ``placement.middleware``'s.

Servers of several processes (uwsgi, mod_wsgi daemon processes) use
prometheus_client's multi-process mode: every process writes its values
to files of one directory (``[metrics] multiprocess_dir``, else
``PROMETHEUS_MULTIPROC_DIR``) and a scrape of any process adds up all of
them. prometheus_client chooses its mode when it is imported, from that
environment variable; so it is imported here only once ``enable`` has set
the variable, and nowhere else.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable

MULTIPROCESS_ENVIRON = "PROMETHEUS_MULTIPROC_DIR"

# Seconds; the service answers most requests in milliseconds, candidate
# searches on large clouds in up to seconds.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0, 30.0)
CANDIDATE_BUCKETS = (0, 1, 5, 10, 50, 100, 500, 1000, 5000, 10000, 50000)


class _Instruments:
    """The metrics, created once per process."""

    def __init__(self) -> None:
        from prometheus_client import Counter, Histogram, disable_created_metrics

        # No ``_created`` series (the time each labelled series first
        # appeared): they double what a scrape carries, for nothing a rate
        # needs (the multi-process mode has none anyway).
        disable_created_metrics()
        self.requests = Counter(
            "placement_http_requests", "Requests answered, by route template, method and "
            "status.", ["route", "method", "status"])
        self.request_seconds = Histogram(
            "placement_http_request_duration_seconds", "Time to answer a request, by route "
            "template and method.", ["route", "method"], buckets=LATENCY_BUCKETS)
        self.candidates = Histogram(
            "placement_allocation_candidates_returned", "Allocation requests returned by "
            "GET /allocation_candidates.", buckets=CANDIDATE_BUCKETS)
        self.claim_conflicts = Counter(
            "placement_claim_conflicts", "Allocation writes (PUT /allocations/{consumer}, "
            "POST /allocations) answered 409, by error code.", ["code"])
        self.retries = Counter(
            "placement_db_retries", "Transactions run again in a new transaction, by why "
            "the previous attempt failed.", ["reason"])
        self.database_errors = Counter(
            "placement_db_errors", "Errors of the database or its driver, by kind (the "
            "oslo.db exception they became, or the driver's).", ["kind"])
        # by the requests answered: the candidates, or provider lists
        # asking for capacity (placement.candidates.lists)
        self.kept_answers = {
            "allocation_candidates": Counter(
                "placement_allocation_candidates_kept_answers", "Candidates requests by "
                "what was kept of an earlier answer of the same kind: given again, stale, "
                "or none.", ["outcome"]),
            "resource_providers": Counter(
                "placement_provider_lists_kept_answers", "Provider lists with "
                "resources by what was kept of an earlier answer to the same list: given "
                "again, stale, or none.", ["outcome"]),
        }
        self.provider_cache_refreshes = Counter(
            "placement_provider_cache_refreshes", "Refreshes of the per-process provider "
            "copy: full reloads and incremental refreshes.", ["kind"])
        self.provider_cache_loaded = Counter(
            "placement_provider_cache_providers_loaded", "Providers read by refreshes of the "
            "per-process provider copy.", ["kind"])
        self.usage_mirror_refreshes = Counter(
            "placement_usage_mirror_refreshes", "Refreshes of the per-process usage "
            "mirror: full reads and incremental refreshes.", ["kind"])
        self.usage_mirror_read = Counter(
            "placement_usage_mirror_providers_read", "Providers whose usages refreshes of "
            "the per-process usage mirror read (a full read: those with any in use).",
            ["kind"])
        # (route, method, status) -> the two series of a request. Asking
        # the metrics for them (``labels``) costs as much as updating them;
        # the labels are few (callers keep them so), so is this.
        self._request_series: dict[tuple[str, str, str], tuple] = {}

    def request_series(self, route: str, method: str, status: str) -> tuple:
        key = (route, method, status)
        series = self._request_series.get(key)
        if series is None:
            series = self._request_series[key] = (
                self.requests.labels(route, method, status),
                self.request_seconds.labels(route, method))
        return series


_instruments: _Instruments | None = None
_enable_lock = threading.Lock()


class MetricsConfigurationError(RuntimeError):
    pass


def enable(multiprocess_dir: str | None = None) -> None:
    """Start recording (once per process; later calls change nothing).
    ``multiprocess_dir`` (created if missing) or ``PROMETHEUS_MULTIPROC_DIR``
    selects the multi-process mode."""
    global _instruments
    with _enable_lock:
        if _instruments is not None:
            return
        if multiprocess_dir:
            if "prometheus_client" in sys.modules and \
                    os.environ.get(MULTIPROCESS_ENVIRON) != multiprocess_dir:
                raise MetricsConfigurationError(
                    "prometheus_client was imported before [metrics] multiprocess_dir was "
                    f"read: set {MULTIPROCESS_ENVIRON} in the environment instead")
            os.environ[MULTIPROCESS_ENVIRON] = multiprocess_dir
        directory = os.environ.get(MULTIPROCESS_ENVIRON)
        if directory:
            os.makedirs(directory, exist_ok=True)
        _instruments = _Instruments()


class _Global:
    """prometheus_client's process-wide registry as one collector of
    another registry."""

    def __init__(self, registry) -> None:
        self.registry = registry

    def collect(self):
        return self.registry.collect()


def exposition_application(collectors: Iterable = ()) -> Callable:
    """prometheus_client's WSGI application serving every metric: this
    process's (with prometheus_client's process, platform and garbage
    collector metrics), or in multi-process mode the sums of those of
    every process of the directory; and what ``collectors`` (objects with
    ``collect``) work out at each scrape in the process answering it
    (``placement.capacity.resource_gauges``), never summed over processes."""
    from prometheus_client import REGISTRY, CollectorRegistry, make_wsgi_app, multiprocess

    # A registry of this application's own: the process-wide one must not
    # hold the collectors of one application (tests build many).
    registry = CollectorRegistry()
    if os.environ.get(MULTIPROCESS_ENVIRON):
        multiprocess.MultiProcessCollector(registry)  # reads the files at every scrape
    else:
        registry.register(_Global(REGISTRY))
    for collector in collectors:
        registry.register(collector)
    return make_wsgi_app(registry)


# -- Recording (no-ops while disabled) ---------------------------------------

def observe_request(route: str, method: str, status: str, seconds: float) -> None:
    instruments = _instruments
    if instruments is not None:
        count, latency = instruments.request_series(route, method, status)
        count.inc()
        latency.observe(seconds)


def count_claim_conflict(code: str) -> None:
    instruments = _instruments
    if instruments is not None:
        instruments.claim_conflicts.labels(code).inc()


def observe_allocation_candidates(count: int) -> None:
    instruments = _instruments
    if instruments is not None:
        instruments.candidates.observe(count)


def count_kept_answer(answers: str, outcome: str) -> None:
    """``answers``: ``allocation_candidates`` or ``resource_providers``
    (lists asking for capacity); ``outcome``: ``given`` (an answer kept
    from an earlier request was given again), ``stale`` (one was kept, but
    usages or providers moved since) or ``none``."""
    instruments = _instruments
    if instruments is not None:
        instruments.kept_answers[answers].labels(outcome).inc()


def count_retry(reason: str) -> None:
    """A transaction is run again: ``reason`` (deadlock, disconnect,
    serialization_failure, generation_conflict, duplicate_entry...) says
    why the previous attempt failed."""
    instruments = _instruments
    if instruments is not None:
        instruments.retries.labels(reason).inc()


def count_database_error(kind: str) -> None:
    instruments = _instruments
    if instruments is not None:
        instruments.database_errors.labels(kind).inc()


def count_usage_mirror_refresh(kind: str, providers: int) -> None:
    """``kind``: ``full`` (every usage read again) or ``incremental`` (those
    of the ``providers`` named by the usage change record)."""
    instruments = _instruments
    if instruments is not None:
        instruments.usage_mirror_refreshes.labels(kind).inc()
        instruments.usage_mirror_read.labels(kind).inc(providers)


def count_provider_cache_refresh(kind: str, providers: int) -> None:
    """``kind``: ``full`` (every provider read again) or ``incremental``
    (the ``providers`` changed ones)."""
    instruments = _instruments
    if instruments is not None:
        instruments.provider_cache_refreshes.labels(kind).inc()
        instruments.provider_cache_loaded.labels(kind).inc(providers)
