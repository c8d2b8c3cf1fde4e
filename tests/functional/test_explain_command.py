"""``placement-explain`` against a running ``placement-api``: the table it
prints says what the service's explanation says, and its count is the
candidates'."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from tests.fixtures.provider_api import ProviderApi
from tests.fixtures.servers import servers_on

QUERY = "resources=VCPU:4,MEMORY_MB:1024"


@pytest.fixture
def service(backend, tmp_path):
    with servers_on(backend, str(tmp_path), 1) as (running, _):
        yield running.ports[0], ProviderApi(running.client(0).request)


def _explain(port: int, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "placement.cmd.explain", "--url", f"http://127.0.0.1:{port}",
         "--token", "admin", *arguments], capture_output=True, text=True, timeout=60)


def test_prints_the_funnel_and_why_a_provider_is_ruled_out(service):
    port, api = service
    fits = api.provider("fits", VCPU=8, MEMORY_MB=4096)
    busy = api.provider("busy", VCPU=8, MEMORY_MB=4096)
    # asked before and after a claim: the funnel kept from the first
    # answer does not outlive the usages it was counted with
    before = json.loads(_explain(port, QUERY, "--json").stdout)
    assert before["groups"][0]["steps"][1]["left"]["providers"] == 2
    assert before["allocation_requests"] == 2
    api.claim(str(uuid.uuid4()), busy, VCPU=6)
    api.provider("diskless", DISK_GB=100)

    shown = _explain(port, QUERY, "--provider", busy, "--provider", fits)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "Unsuffixed group"
    funnel = [line.split() for line in lines[2:6]]
    # constraint, description, providers in -> out, trees in -> out
    assert [row[0] for row in funnel] == ["inventory", "capacity", "inventory", "capacity"]
    assert funnel[0][1:] == ["VCPU", "3", "->", "2", "3", "->", "2"]
    assert funnel[1][-2:] == ["capacity", "1"]
    assert "Allocation requests: 1" in lines
    assert (f"  {busy}: ruled out by capacity (unsuffixed group): VCPU: requested 4, "
            "free 2 of capacity 8 (used 6)") in lines
    assert f"  {fits}: not ruled out; in 1 allocation request(s)" in lines
    assert len(api.candidates(QUERY)["allocation_requests"]) == 1

    after = json.loads(_explain(port, QUERY, "--json").stdout)
    assert after["groups"][0]["steps"][1]["ruled_out"] == {"capacity": 1}
    assert after["allocation_requests"] == 1


def test_reports_the_service_error(service):
    port, _ = service
    shown = _explain(port, "resources=CUSTOM_UNKNOWN:1")
    assert shown.returncode == 1
    assert "answered 400" in shown.stderr
    assert "Invalid resource class in resources parameter" in shown.stderr
    refused = _explain(port, QUERY, "--token", "nova:service-project")
    assert refused.returncode == 1
    assert "answered 403" in refused.stderr
