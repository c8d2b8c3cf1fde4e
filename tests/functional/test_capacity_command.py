"""``placement-capacity``: the answer of GET /capacity read from the
configured database, as a table, as JSON, and drawn as an SVG chart."""

from __future__ import annotations

import json
import uuid
import xml.etree.ElementTree as ElementTree

import pytest

from placement.cmd import capacity
from tests.fixtures.base import build_app
from tests.fixtures.provider_api import ProviderApi, in_process


@pytest.fixture
def configured(database, tmp_path, monkeypatch):
    """Two computes (cn1 with a consumer of 6 VCPU) in the configured database."""
    monkeypatch.setenv("OS_PLACEMENT_DATABASE__CONNECTION", database.url)
    monkeypatch.setenv("OS_PLACEMENT_CONFIG_DIR", str(tmp_path))
    api = ProviderApi(in_process(build_app(database)))
    cn1 = api.provider("cn1", VCPU=8, MEMORY_MB=8192)
    cn2 = api.provider("cn2", VCPU=4, MEMORY_MB=1024)
    consumer = str(uuid.uuid4())
    api.claim(consumer, cn1, VCPU=6)
    return cn1, cn2, consumer


def test_a_table_of_the_roots_with_most_room(configured, capsys):
    assert capacity.main(["resources=VCPU:1,MEMORY_MB:512"]) == 0
    out = capsys.readouterr().out
    assert "Fit: 4 more (exact), on 2 of 2 roots counted" in out
    lines = out.splitlines()
    # most room first, ties in the order of the roots
    assert lines[4].split()[0::2] == ["cn1", "2"] and lines[4].endswith("VCPU")
    assert lines[5].split()[0::2] == ["cn2", "2"] and lines[5].endswith("MEMORY_MB")


def test_json_with_a_drain_and_a_chart(configured, capsys, tmp_path):
    cn1, cn2, consumer = configured
    chart = tmp_path / "capacity.svg"
    assert capacity.main(["resources=VCPU:1", "--json", f"--drain-provider={cn2}",
                          "--chart", str(chart)]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["total"] == 2 and answer["exact"] is True
    assert answer["drain"]["consumers"] == 0
    assert answer["roots"] == [{"uuid": cn1, "count": 2, "binding": "VCPU"}]
    svg = ElementTree.parse(chart).getroot()
    texts = [element.text for element in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert "resources=VCPU:1: 2 more fit (exact)" in texts and "cn1" in texts


def test_a_bad_shape_is_said(configured, capsys):
    assert capacity.main(["resources=VCPU"]) == 2
    assert "Badly formed resources parameter" in capsys.readouterr().err
