"""Scaling out on a MariaDB Galera cluster (README.rst, "Scaling out"): three
nodes on loopback configured by etc/placement/galera.cnf, every node a
writer, and one placement-api process on each node.

- A storm of claims and deletes (every delete through another server than
  its claim) over a nearly full cloud, one node killed (``kill -9``) in the
  middle and restarted, rejoining by IST: no 500, 503 with Retry-After only
  from the server whose node is down, claims through that server again once
  the node is back, no claim lost, half-written or over capacity, and every
  node holding the same rows.
- A read on one node sees a write acknowledged through another node even
  while that node lags behind (its applier paused by FLUSH TABLES WITH READ
  LOCK): the service waits for the cluster's writes at the start of each
  transaction.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
import uuid

import pytest
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import tables
from tests import db as test_db
from tests import db_servers
from tests.fixtures import ops, storm
from tests.fixtures.storm import ADMIN

pytestmark = [pytest.mark.backend("mysql"), pytest.mark.slow, pytest.mark.external("galera")]

NODES = 3
PROVIDERS = 20
# A handful of claims fill a provider: most claims of the storm are refused
# for want of capacity once the cloud is full, or race for the last units.
VCPU_PER_PROVIDER = 4
WRITERS = 8
READERS = 3
# The storm's timeline, in seconds: no fault, the node down (the cluster
# takes about five seconds, evs.suspect_timeout, to evict it; writes wait
# meanwhile), after its return.
STEADY = 8.0
DOWN = 5.0
AFTER_RETURN = 6.0
# The node killed, and the server on it.
VICTIM = 2


@pytest.fixture(scope="module")
def cluster():
    # Without Galera installed, tests/conftest.py deselects this module (or
    # fails the run under CI): see its ``external`` marker.
    cluster = db_servers.GaleraCluster(NODES)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def services(cluster, tmp_path_factory):
    """(URL of the placement-api on each node, the database URL on each
    node, the servers)."""
    database_urls = cluster.create_database(f"placement_{uuid.uuid4().hex[:8]}")
    config_dir = str(tmp_path_factory.mktemp("galera-config"))
    with contextlib.ExitStack() as stack:
        servers = []
        # One after the other: the first creates the schema.
        for url in database_urls:
            servers.append(stack.enter_context(ops.api_server(ops.free_port(), {
                "OS_PLACEMENT_CONFIG_DIR": config_dir,
                "OS_PLACEMENT_DATABASE__CONNECTION": url,
                "OS_PLACEMENT_DATABASE__SYNC_ON_STARTUP": "True",
                "OS_API__AUTH_STRATEGY": "noauth2"})))
            _wait_for_version_document(servers[-1].url)
        yield [server.url for server in servers], database_urls, servers


def _wait_for_version_document(url: str) -> None:
    deadline = time.monotonic() + 60
    while ops.request(url + "/")[0] != 200:
        assert time.monotonic() < deadline, f"{url} does not serve"
        time.sleep(0.1)


# What the service writes: the same rows on every node.
_COMPARED = (tables.resource_providers, tables.inventories, tables.allocations,
             tables.consumers, tables.provider_change_shards, tables.provider_changes)


def _rows(database_url: str) -> dict[str, list[tuple]]:
    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            # Every write the cluster committed applied here first.
            connection.exec_driver_sql("SET SESSION wsrep_sync_wait = 1")
            return {table.name: sorted(tuple(row) for row in connection.execute(
                sa.select(*table.c).order_by(*table.primary_key.columns)))
                for table in _COMPARED}
    finally:
        engine.dispose()


def test_storm_with_a_node_killed_and_rejoining(cluster, services, report):
    urls, database_urls, servers = services
    providers = storm.seed(urls[0], PROVIDERS, VCPU_PER_PROVIDER, name="galera")
    load = storm.Load(urls, providers, WRITERS, READERS)
    victim = cluster.nodes[VICTIM]
    with load:
        started = time.monotonic()
        time.sleep(STEADY)
        killed = time.monotonic()
        victim.kill()
        time.sleep(DOWN)
        # As a crashed host reboots: after the others noticed (a node that
        # rejoins before waits for its old self to time out).
        cluster.wait_for_size(NODES - 1)
        restarting = time.monotonic()
        victim.start()  # until it has caught up (IST) with the others
        back = time.monotonic()
        time.sleep(AFTER_RETURN)
        ended = time.monotonic()
    answers = load.answers
    report(f"galera storm, no fault ({WRITERS} writers over {NODES} servers): "
           f"{load.summary(started, killed)}")
    report(f"galera storm, node {VICTIM} killed for {restarting - killed:.1f} s, synced again "
           f"after {back - restarting:.1f} s: {load.summary(killed, ended)}")

    # It asked for the writes it missed (IST) from its recovered position,
    # not for a copy of everything (SST, from the unknown position 0).
    transfers = re.findall(r"IST uuid:(\S+) f: (\d+)", victim.error_log())
    assert transfers and int(transfers[-1][1]) > 0, transfers
    unexpected = [answer for answer in answers if answer.status not in (200, 204, 409, 503)]
    # the server's log without its request lines: the errors and their tracebacks
    errors = [line for line in servers[unexpected[0].server].output().splitlines()
              if " INFO " not in line] if unexpected else []
    assert not unexpected, f"{unexpected[:5]}\n" + "\n".join(errors[-300:])
    unavailable = [answer for answer in answers if answer.status == 503]
    for answer in unavailable:
        assert storm.is_database_unavailable(answer), answer
        # Only the server of the node that is down, only while it is.
        assert answer.server == VICTIM and killed <= answer.ended and answer.started <= back, \
            answer
    assert any(answer.method == "GET" and answer.started < restarting for answer in unavailable)
    # Served again, every request, once the node is back; claims through
    # its server made again.
    after_return = [answer for answer in answers if answer.started > back]
    assert after_return and all(answer.status != 503 for answer in after_return)
    claims_back = [answer for answer in after_return
                   if answer.server == VICTIM and answer.method == "PUT" and answer.status == 204]
    assert claims_back
    report(f"galera storm: first claim through the rejoined node's server answered "
           f"{min(answer.ended for answer in claims_back) - back:.2f} s after it synced")

    victim_probes = [probe.status for probe in load.probes
                     if probe.server == VICTIM and killed < probe.sent and
                     probe.answered < restarting]
    assert 503 in victim_probes, load.probes
    assert {probe.status for probe in load.probes if probe.server != VICTIM} == {200}
    assert [probe.status for probe in load.probes if probe.server == VICTIM][-1] == 200

    # Each server reads the same allocations, none lost or over capacity,
    # and every node holds the same rows.
    held = [storm.check_claims(load, url, VCPU_PER_PROVIDER) for url in urls]
    assert held[0] == held[1] == held[2]
    rows = [_rows(url) for url in database_urls]
    assert rows[0] == rows[1] == rows[2]
    assert len(rows[0]["allocations"]) == len(held[0])
    for server in servers:
        # (oslo.db logs a traceback for each write that ran out of retries.)
        for failure in ("Unexpected error serving", "Internal Server Error"):
            assert failure not in server.output(), server.output()
    report(f"galera storm: {load.outcomes()}, {len(held[0])} held on every node")


def test_a_certification_failure_is_retried_in_a_new_transaction(services):
    """Another host commits a write of the same row through another node
    first: this transaction fails certification (a deadlock, at COMMIT or
    at its next statement) and runs again, from a new transaction."""
    _, database_urls, _ = services
    here = db_api.Database(db_api.create_engine(database_urls[0]))
    elsewhere = sa.create_engine(database_urls[1], poolclass=sa.pool.NullPool)
    shards = tables.provider_change_shards
    bump = shards.update().where(shards.c.shard == 7).values(version=shards.c.version + 1)
    transactions = []

    def bump_racing_once() -> None:
        with here.writer() as connection:
            transactions.append(connection.get_transaction())
            connection.execute(bump)
            if len(transactions) == 1:
                with elsewhere.begin() as other:
                    other.execute(bump)

    try:
        with here.reader() as connection:
            before = connection.scalar(sa.select(shards.c.version).where(shards.c.shard == 7))
        here.retry_on_db_error(bump_racing_once)()
        with here.reader() as connection:
            after = connection.scalar(sa.select(shards.c.version).where(shards.c.shard == 7))
    finally:
        here.dispose()
        elsewhere.dispose()
    first, second = transactions
    assert first is not second
    # Both writes, each once: the other host's and the retry's.
    assert after == before + 2


def test_readme_shows_the_configuration_the_nodes_run():
    with open(db_servers.GALERA_CONFIG) as config:
        settings = [line for line in config if line.strip() and not line.startswith("#")]
    with open(os.path.join(ops.REPO_ROOT, "README.rst")) as readme:
        assert "".join(f"    {line}" for line in settings) in readme.read()


def _put_claim(url: str, consumer: str, provider: str) -> None:
    status, _, body = ops.request(f"{url}/allocations/{consumer}", method="PUT", headers=ADMIN,
                                  body={"allocations": {provider: {"resources": {"VCPU": 1}}},
                                        "project_id": "project", "user_id": "user",
                                        "consumer_generation": None,
                                        "consumer_type": "INSTANCE"})
    assert status == 204, body


def _allocations_on_node(database_url: str, consumer: str) -> int:
    """The consumer's allocation rows the node holds, read at once."""
    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            return connection.scalar(sa.select(sa.func.count()).select_from(tables.allocations)
                                     .where(tables.allocations.c.consumer_id == consumer))
    finally:
        engine.dispose()


def _waiting_for_the_cluster(admin_url: str) -> bool:
    """A session of the node waits for the cluster's writes (the service's
    first statement of a transaction)."""
    engine = test_db.admin_engine("mysql", admin_url)
    try:
        with engine.connect() as connection:
            return bool(connection.exec_driver_sql(
                "SELECT COUNT(*) FROM information_schema.processlist "
                "WHERE info LIKE 'SET STATEMENT wsrep_sync_wait%%'").scalar())
    finally:
        engine.dispose()


def test_a_lagging_node_reads_what_another_acknowledged(cluster, services):
    urls, database_urls, _ = services
    provider = storm.seed(urls[0], 1, VCPU_PER_PROVIDER, name="lagging")[0]
    lagging = cluster.nodes[1]
    reads: list[tuple[int, bytes]] = []
    consumer = str(uuid.uuid4())
    pause = test_db.admin_engine("mysql", lagging.admin_url)
    with pause.connect() as paused:
        # The node stops applying the others' writes until UNLOCK TABLES.
        paused.exec_driver_sql("FLUSH TABLES WITH READ LOCK")
        try:
            _put_claim(urls[0], consumer, provider)
            # The node does lag: read at once, it does not hold the claim.
            assert _allocations_on_node(database_urls[1], consumer) == 0
            reader = threading.Thread(target=lambda: reads.append(
                ops.request(f"{urls[1]}/allocations/{consumer}", headers=ADMIN)[::2]))
            reader.start()
            while reader.is_alive() and not _waiting_for_the_cluster(lagging.admin_url):
                time.sleep(0.05)
        finally:
            paused.exec_driver_sql("UNLOCK TABLES")
        reader.join(60)
    pause.dispose()
    (status, body), = reads
    assert status == 200, body
    allocations = json.loads(body)["allocations"]
    assert {held_on: held["resources"] for held_on, held in allocations.items()} == {
        provider: {"VCPU": 1}}
