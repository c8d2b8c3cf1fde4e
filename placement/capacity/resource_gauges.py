"""The capacity gauges of ``GET /metrics`` (``[capacity] resource_gauges``):
per resource class, for the whole cloud (``aggregate=""``) and for each of
the ``[capacity] aggregate_gauges_limit`` largest aggregates,
``placement_capacity_total`` ((total - reserved) * allocation_ratio),
``placement_capacity_used`` and ``placement_capacity_free``.

They are worked out at each scrape by the process answering it, from its
provider copy and one read of the usages
(``placement.candidates.inventory_usages``), by a collector registered
with the registry of that process's exposition (``placement.metrics``).
Nothing is written to prometheus_client's multi-process files: a scrape
of any process gives the cloud's figures once, not once per process.
"""

from __future__ import annotations

from collections.abc import Iterator

from oslo_db import exception as db_exc
from oslo_log import log as logging

from placement.candidates import inventory_usages
from placement.db import api as db_api

LOG = logging.getLogger(__name__)

LABELS = ("resource_class", "aggregate")
# name -> (help, the Total field it shows)
GAUGES = {
    "placement_capacity_total": (
        "Capacity of a resource class, (total - reserved) * allocation_ratio summed "
        "over its inventories, in the whole cloud (aggregate=\"\") or an aggregate.",
        "capacity"),
    "placement_capacity_used": (
        "Amount of a resource class allocated, in the whole cloud (aggregate=\"\") "
        "or an aggregate.", "used"),
    "placement_capacity_free": (
        "Amount of a resource class that can still be allocated (each inventory's "
        "capacity less its usage, none where usage exceeds it), in the whole cloud "
        "(aggregate=\"\") or an aggregate.", "free"),
}


class ResourceCollector:
    """A prometheus_client collector of the capacity gauges of ``db``'s
    cloud."""

    def __init__(self, db: db_api.Database, aggregate_limit: int) -> None:
        self.db = db
        self.aggregate_limit = aggregate_limit

    def describe(self) -> list:
        # Nothing to check for clashes at registration, and no scrape then.
        return []

    def collect(self) -> Iterator:
        from prometheus_client.core import GaugeMetricFamily

        try:
            with self.db.reader() as connection:
                snapshot = inventory_usages.read(connection)
        except db_exc.DBError as error:
            # the other metrics are still served; the health check says why
            LOG.warning("No capacity gauges in this scrape: %s", db_api.summary(error))
            return
        totals = inventory_usages.capacity_totals(snapshot, self.aggregate_limit)
        for name, (description, field) in GAUGES.items():
            family = GaugeMetricFamily(name, description, labels=LABELS)
            for total in totals:
                family.add_metric((total.resource_class, total.aggregate),
                                  getattr(total, field))
            yield family


def collectors(resource_gauges: bool, db: db_api.Database, aggregate_limit: int) -> list:
    """The collectors of the capacity gauges ``[capacity]`` asks for."""
    return [ResourceCollector(db, aggregate_limit)] if resource_gauges else []
