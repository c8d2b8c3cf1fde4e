"""Several processes migrating one fresh database at once (as uwsgi
lazy-apps workers do) all end with the schema at head and no error."""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize

from placement.db import api as db_api
from placement.db import migration

PROCESSES = 4
# New processes race for each of these fresh files: their first connections
# race to switch the file to WAL mode, then the migrations race for the
# schema. One file alone rarely shows a loser.
FILES = 12


def _migrate(url: str, start: multiprocessing.synchronize.Barrier) -> None:
    engine = db_api.create_engine(url)
    start.wait(60)
    migration.upgrade(engine)
    engine.dispose()


def test_concurrent_migrations_of_fresh_sqlite_files(tmp_path):
    # Forked: starting together matters more than a clean interpreter.
    context = multiprocessing.get_context("fork")
    for number in range(FILES):
        url = f"sqlite:///{tmp_path}/placement-{number}.sqlite"
        start = context.Barrier(PROCESSES)
        workers = [context.Process(target=_migrate, args=(url, start))
                   for _ in range(PROCESSES)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(120)
        assert [worker.exitcode for worker in workers] == [0] * PROCESSES, url
        engine = db_api.create_engine(url)
        assert migration.current_revision(engine) == migration.head_revision()
        engine.dispose()
