"""Fresh databases for tests.

The backend comes from ``PLACEMENT_TEST_BACKEND`` (``sqlite`` by default).
SQLite databases are copies of one migrated template file, which makes a
fresh database per gabbi file cheap.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading

from placement.db import api as db_api
from placement.db import migration

BACKEND = os.environ.get("PLACEMENT_TEST_BACKEND", "sqlite")

_template_lock = threading.Lock()
_template_path: str | None = None
_workdir = tempfile.mkdtemp(prefix="placement-tests-")


def _sqlite_template() -> str:
    global _template_path
    with _template_lock:
        if _template_path is None:
            path = os.path.join(_workdir, "template.sqlite")
            engine = db_api.create_engine("sqlite:///" + path)
            migration.upgrade(engine)
            engine.dispose()
            _template_path = path
        return _template_path


class FreshDatabase:
    """A new, migrated database holding only the standard data."""

    def __init__(self) -> None:
        if BACKEND != "sqlite":
            raise RuntimeError(f"unsupported test backend {BACKEND!r}")
        handle, self.path = tempfile.mkstemp(suffix=".sqlite", dir=_workdir)
        os.close(handle)
        shutil.copyfile(_sqlite_template(), self.path)
        self.url = "sqlite:///" + self.path
        self.db = db_api.Database(db_api.create_engine(self.url))

    def close(self) -> None:
        self.db.dispose()
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(self.path + suffix):
                os.unlink(self.path + suffix)
