"""Several processes migrating one fresh database at once (as uwsgi
lazy-apps workers do) all end with the schema at head and no error."""

import multiprocessing

from placement.db import api as db_api
from placement.db import migration


def _migrate(url: str) -> None:
    engine = db_api.create_engine(url)
    migration.upgrade(engine)
    engine.dispose()


def test_concurrent_migrations_of_a_fresh_sqlite_file(tmp_path):
    url = f"sqlite:///{tmp_path}/placement.sqlite"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_migrate, args=(url,)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [worker.exitcode for worker in workers] == [0, 0, 0, 0]
    engine = db_api.create_engine(url)
    assert migration.current_revision(engine) == migration.head_revision()
    engine.dispose()
