"""The Grafana dashboard shipped as a sample (``placement-manage sample
grafana``, and in etc/placement/): valid JSON of a dashboard whose every
query names only metrics the service exports."""

from __future__ import annotations

import json
import os
import re
import uuid

import pytest

from placement.cmd import manage
from tests.fixtures.base import build_app
from tests.fixtures.metrics import scrape
from tests.fixtures.ops import REPO_ROOT
from tests.fixtures.provider_api import ProviderApi, in_process

ETC_COPY = os.path.join(REPO_ROOT, "etc", "placement", "grafana-capacity.json")
METRIC = re.compile(r"\bplacement_[a-z_]+\b")
def _dashboard() -> dict:
    return json.loads(manage.sample_text("grafana"))


def _queries(dashboard: dict) -> list[str]:
    queries = [target["expr"] for panel in dashboard["panels"]
               for target in panel["targets"]]
    queries += [variable["query"]["query"] for variable in dashboard["templating"]["list"]
                if variable["type"] == "query"]
    return queries


def test_etc_holds_the_sample():
    with open(ETC_COPY) as copy:
        assert copy.read() == manage.sample_text("grafana"), (
            "etc/placement/grafana-capacity.json is a copy of "
            "placement/samples/grafana-capacity.json: copy it again")


def test_a_dashboard_of_unique_panels():
    dashboard = _dashboard()
    assert dashboard["uid"] and dashboard["title"]
    panels = dashboard["panels"]
    assert len({panel["id"] for panel in panels}) == len(panels)
    for panel in panels:
        assert panel["targets"], panel["title"]
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"])
        refs = [target["refId"] for target in panel["targets"]]
        assert len(set(refs)) == len(refs), panel["title"]


@pytest.fixture
def exported(database) -> set[str]:
    """Every metric name a scrape shows, once a request and a claim made
    every kind of series appear (histograms and counters by their
    families' sample names), with a shape whose free slots are counted."""
    app = build_app(database, {("metrics", "enabled"): True,
                               ("capacity", "shapes"): ["small=resources=VCPU:1"]})
    api = ProviderApi(in_process(app))
    provider = api.provider("cn1", VCPU=8)
    api.claim(str(uuid.uuid4()), provider, VCPU=1)
    return {name for name, _ in scrape(app)}


def test_queries_name_only_exported_metrics(exported):
    named = {name for query in _queries(_dashboard()) for name in METRIC.findall(query)}
    assert {"placement_capacity_total", "placement_capacity_used",
            "placement_capacity_free", "placement_capacity_free_slots"} <= named
    assert named <= exported
    for query in _queries(_dashboard()):
        assert METRIC.search(query), query
