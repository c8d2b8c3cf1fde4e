"""The capacity gauges of GET /metrics: the free slots of each shape the
operator names (``[capacity] shapes``), counted at scrape time.

A prometheus_client collector, registered only in the registry of the
process answering the scrape (``placement.metrics.exposition_application``),
so that in the multi-process mode, where every other series is the sum of
the files of all processes, these are the answering process's alone,
never added up across processes (each would count the same cloud). They
are counted from its provider copy with one read of the usages for all
shapes; once ``scrape_cpu_seconds`` of CPU are spent, the shapes not
counted yet give the value of an earlier scrape, and are the first
counted at the next one."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import NamedTuple

from placement import exceptions
from placement.candidates.model import RequestGroup, SearchOptions
from placement.capacity.count import count, read_usages
from placement.db import api as db_api


class Shape(NamedTuple):
    name: str
    groups: list[RequestGroup]
    options: SearchOptions


class Counts(NamedTuple):
    # shape name -> (free slots, exact), of this scrape or an earlier one
    values: dict[str, tuple[int, bool]]
    # the shapes given an earlier scrape's value (or none, never counted)
    stale: int
    cpu_seconds: float


class CapacityCollector:
    """Counts every configured shape at each scrape, within a CPU budget."""

    def __init__(self, db: db_api.Database, shapes: list[Shape], cpu_seconds: float):
        self._db = db
        self._shapes = shapes
        self._budget = cpu_seconds
        self._last: dict[str, tuple[int, bool]] = {}
        # the shapes left uncounted by the last scrape come first
        self._order = list(range(len(shapes)))
        # scrapes of one process count one at a time (the second then
        # finds the copy and the memos warm)
        self._lock = threading.Lock()

    def counts(self) -> Counts:
        with self._lock:
            return self._counts()

    def _counts(self) -> Counts:
        started = time.thread_time()
        counted: list[int] = []
        with self._db.reader() as connection:
            used = read_usages(connection)
            for index in self._order:
                if counted and self._budget and time.thread_time() - started > self._budget:
                    break
                shape = self._shapes[index]
                try:
                    found = count(connection, shape.groups, shape.options, used)
                    self._last[shape.name] = (found.total, found.exact)
                except exceptions.InvalidInput:
                    # a class or trait no one has created yet: nothing fits
                    self._last[shape.name] = (0, True)
                counted.append(index)
        skipped = [index for index in self._order if index not in counted]
        self._order = skipped + counted
        return Counts(dict(self._last), len(skipped), time.thread_time() - started)

    def collect(self) -> Iterator[object]:
        # imported at scrape time: placement.metrics chooses the mode of
        # prometheus_client before it is first imported
        from prometheus_client.core import GaugeMetricFamily

        counts = self.counts()
        free = GaugeMetricFamily(
            "placement_capacity_free_slots", "Whole instances of the configured shape "
            "that still fit ([capacity] shapes), counted at scrape time as GET /capacity "
            "counts; exact unless placement_capacity_free_slots_exact is 0 (a lower "
            "bound).", labels=["shape"])
        exact = GaugeMetricFamily(
            "placement_capacity_free_slots_exact", "1 when the free slots of the shape "
            "are exact, 0 when they are a lower bound.", labels=["shape"])
        for shape in self._shapes:
            if shape.name in counts.values:
                total, is_exact = counts.values[shape.name]
                free.add_metric([shape.name], total)
                exact.add_metric([shape.name], int(is_exact))
        yield free
        yield exact
        yield GaugeMetricFamily(
            "placement_capacity_stale_shapes", "Shapes this scrape did not count within "
            "[capacity] scrape_cpu_seconds: they report an earlier scrape's value.",
            value=counts.stale)
        yield GaugeMetricFamily(
            "placement_capacity_scrape_cpu_seconds", "CPU seconds this scrape spent "
            "counting the shapes.", value=counts.cpu_seconds)
