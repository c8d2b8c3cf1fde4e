"""Database servers of the tests' own: a MariaDB and a PostgreSQL instance,
each in a temporary directory and on a free port, which a test may stop,
start again and cut off. The machine's own servers, which other test runs
use at the same time, are never stopped.

As root, MariaDB is told to run as root (``--user=root``) and PostgreSQL,
which refuses root, runs as the ``postgres`` account.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time

from tests import db as test_db
from tests.fixtures import ops

START_TIMEOUT = 60


def _as_root() -> bool:
    return os.geteuid() == 0


class PrivateServer:
    """A server of ``backend`` in its own directory; ``start()`` it first
    (starting or stopping it twice does nothing), ``close()`` it at the
    end."""

    backend: str
    # The administrative connection's database (and the maintenance one).
    admin_database: str

    def __init__(self) -> None:
        self.workdir = tempfile.mkdtemp(prefix=f"placement-private-{self.backend}-")
        self.port = ops.free_port()
        self._initialize()

    def url(self, database: str) -> str:
        raise NotImplementedError

    @property
    def admin_url(self) -> str:
        return self.url(self.admin_database)

    def _initialize(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def _wait_until_up(self) -> None:
        """Until the server accepts an SQL connection."""
        deadline = time.monotonic() + START_TIMEOUT
        while test_db.server_unavailable_reason(self.backend, self.admin_url) is not None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.backend} on port {self.port} did not come up")
            time.sleep(0.05)

    def create_database(self, name: str) -> str:
        """A new empty database; returns its URL."""
        engine = test_db.admin_engine(self.backend, self.admin_url)
        with engine.connect() as connection:
            connection.exec_driver_sql(f"CREATE DATABASE {name}")
        engine.dispose()
        return self.url(name)

    def kill_connections(self, url: str) -> int:
        """Kill every connection to the database of ``url``."""
        return test_db.kill_connections(url, self.admin_url)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


class PrivateMariaDB(PrivateServer):
    backend = "mysql"
    admin_database = ""

    def url(self, database: str) -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.port}/{database}"

    def _initialize(self) -> None:
        self.datadir = os.path.join(self.workdir, "data")
        self.process: subprocess.Popen | None = None
        subprocess.run(
            ["mariadb-install-db", "--no-defaults", f"--datadir={self.datadir}",
             "--auth-root-authentication-method=normal", "--skip-test-db",
             "--skip-name-resolve", *self._user_option()],
            check=True, capture_output=True, timeout=START_TIMEOUT)

    def _user_option(self) -> list[str]:
        return ["--user=root"] if _as_root() else []

    def start(self) -> None:
        if self.process is not None:
            return
        self.process = subprocess.Popen(
            ["mariadbd", "--no-defaults", f"--datadir={self.datadir}", f"--port={self.port}",
             "--bind-address=127.0.0.1", f"--socket={self.workdir}/mysqld.sock",
             f"--pid-file={self.workdir}/mysqld.pid", "--skip-log-bin",
             "--innodb-buffer-pool-size=32M", f"--log-error={self.workdir}/error.log",
             *self._user_option()],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_until_up()

    def stop(self) -> None:
        """A clean shutdown (SIGTERM), as an operator's restart does."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=START_TIMEOUT)
        self.process = None


def _postgresql_bin(program: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{program}"))
    return found[-1] if found else program


class PrivatePostgreSQL(PrivateServer):
    backend = "postgresql"
    admin_database = "postgres"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, program: str, *args: str) -> None:
        command = [_postgresql_bin(program), *args]
        if _as_root():
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=START_TIMEOUT)

    def _initialize(self) -> None:
        if _as_root():
            shutil.chown(self.workdir, "postgres", "postgres")
        os.chmod(self.workdir, 0o755)
        self.datadir = os.path.join(self.workdir, "data")
        self.running = False
        self._run("initdb", "-D", self.datadir, "-A", "trust", "-U", "postgres", "-N",
                  "-E", "UTF8", "--locale=C.UTF-8")

    def start(self) -> None:
        if self.running:
            return
        self._run("pg_ctl", "-D", self.datadir, "-l", f"{self.workdir}/server.log", "-w",
                  "-o", f"-p {self.port} -k {self.workdir} -c listen_addresses=127.0.0.1",
                  "start")
        self.running = True
        self._wait_until_up()

    def stop(self) -> None:
        """A fast shutdown: sessions are ended, as an operator's restart does."""
        if self.running:
            self._run("pg_ctl", "-D", self.datadir, "-m", "fast", "-w", "stop")
        self.running = False


SERVERS = {"mysql": PrivateMariaDB, "postgresql": PrivatePostgreSQL}
