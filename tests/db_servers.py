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
import re
import shutil
import signal
import subprocess
import tempfile
import time

from placement.db import server_databases
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
        server_databases.create_database(self.admin_url, name)
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

    def __init__(self, *server_options: str) -> None:
        # mariadbd options after the defaults below (the last one of a name
        # wins), e.g. "--log-bin"
        self.server_options = server_options
        super().__init__()

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
             *self._user_option(), *self.server_options],
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


GALERA_CONFIG = os.path.join(ops.REPO_ROOT, "etc", "placement", "galera.cnf")
GALERA_PROVIDER = "/usr/lib/galera/libgalera_smm.so"


def galera_unavailable_reason() -> str | None:
    """Why a Galera cluster cannot be started here, or None."""
    for path in (GALERA_PROVIDER, shutil.which("mariadbd") or "mariadbd",
                 shutil.which("rsync") or "rsync"):
        if not os.path.exists(path):
            return f"{path} is not installed (Debian: galera-4, mariadb-server, rsync)"
    return None


class GaleraNode(PrivateMariaDB):
    """A node of ``GaleraCluster``: etc/placement/galera.cnf, with its own
    data directory and loopback ports (SQL, group communication, IST and
    SST). As root it runs as ``mysql``: the rsync daemon receiving a state
    transfer drops root for ``nobody``, who may not write the data
    directory, but keeps another account."""

    def __init__(self, cluster: GaleraCluster, first: bool) -> None:
        self.cluster = cluster
        self.first = first
        # group communication, IST receiver, SST receiver
        self.group_port, self.ist_port, self.sst_port = ops.free_ports(3)
        super().__init__()

    def _initialize(self) -> None:
        if _as_root():
            shutil.chown(self.workdir, "mysql", "mysql")
        if self.first:
            super()._initialize()
        else:
            # It receives its data from the cluster when it joins.
            self.datadir = os.path.join(self.workdir, "data")
            self.process = None
            os.mkdir(self.datadir)
            if _as_root():
                shutil.chown(self.datadir, "mysql", "mysql")

    def _user_option(self) -> list[str]:
        return ["--user=mysql"] if _as_root() else []

    def start(self, new_cluster: bool = False) -> None:
        """Join the cluster (``new_cluster``: be its first node)."""
        if self.process is not None:
            return
        self.process = subprocess.Popen(
            [*self._command(), f"--log-error={self.workdir}/error.log",
             *self._start_position(), *(["--wsrep-new-cluster"] if new_cluster else [])],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.wait_until_synced()

    def _command(self) -> list[str]:
        cluster_address = ",".join(f"127.0.0.1:{node.group_port}" for node in self.cluster.nodes)
        return [
            "mariadbd", f"--defaults-file={GALERA_CONFIG}", f"--datadir={self.datadir}",
            f"--port={self.port}", "--bind-address=127.0.0.1",
            f"--socket={self.workdir}/mysqld.sock", f"--pid-file={self.workdir}/mysqld.pid",
            "--innodb-buffer-pool-size=32M",
            f"--wsrep-cluster-address=gcomm://{cluster_address}",
            f"--wsrep-node-address=127.0.0.1:{self.group_port}",
            f"--wsrep-node-incoming-address=127.0.0.1:{self.port}",
            f"--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{self.group_port};"
            f"ist.recv_addr=127.0.0.1:{self.ist_port}",
            f"--wsrep-sst-receive-address=127.0.0.1:{self.sst_port}", *self._user_option()]

    def _start_position(self) -> list[str]:
        """After a crash, the position of the node's data in the cluster's
        history, recovered from InnoDB (as Debian's systemd unit does with
        galera_recovery): told it, the node asks the others for the writes
        it missed only (IST), not for a copy of everything (SST)."""
        state = os.path.join(self.datadir, "grastate.dat")
        if not os.path.exists(state) or "seqno:   -1" not in open(state).read():
            return []
        log = os.path.join(self.workdir, "recovery.log")
        subprocess.run([*self._command(), f"--log-error={log}", "--wsrep-recover"],
                       check=True, capture_output=True, timeout=START_TIMEOUT)
        with open(log) as recovery:
            position = re.findall(r"WSREP: Recovered position: (\S+)", recovery.read())
        return [f"--wsrep-start-position={position[-1]}"]

    def wait_until_synced(self) -> None:
        """Until the node serves SQL and has caught up with the cluster."""
        deadline = time.monotonic() + START_TIMEOUT
        while self.status("wsrep_local_state_comment") != "Synced":
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Galera node on port {self.port} did not join:\n"
                                   f"{self.error_log()[-6000:]}")
            time.sleep(0.1)

    def status(self, name: str) -> str | None:
        """A status variable; None while the node does not answer."""
        if test_db.server_unavailable_reason(self.backend, self.admin_url) is not None:
            return None
        engine = test_db.admin_engine(self.backend, self.admin_url)
        try:
            with engine.connect() as connection:
                row = connection.exec_driver_sql(f"SHOW STATUS LIKE '{name}'").first()
        finally:
            engine.dispose()
        return row[1] if row else None

    def kill(self) -> None:
        """``kill -9``: the node dies mid-transaction, as in a crash."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def error_log(self) -> str:
        try:
            with open(os.path.join(self.workdir, "error.log"), errors="replace") as log:
                return log.read()
        except OSError:
            return ""


class GaleraCluster:
    """``size`` Galera nodes on loopback, each in its own temporary
    directory; the machine's own MariaDB is never touched."""

    def __init__(self, size: int = 3) -> None:
        self.nodes: list[GaleraNode] = []
        for number in range(size):
            self.nodes.append(GaleraNode(self, first=number == 0))

    def start(self) -> None:
        """The first node founds the cluster; the others join it (a copy of
        its data directory by rsync, one after the other)."""
        first, *others = self.nodes
        first.start(new_cluster=True)
        for node in others:
            node.start()

    def wait_for_size(self, size: int) -> None:
        """Until the running nodes see a cluster of ``size`` nodes."""
        deadline = time.monotonic() + START_TIMEOUT
        running = [node for node in self.nodes if node.process is not None]
        while any(node.status("wsrep_cluster_size") != str(size) for node in running):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster did not become {size} nodes")
            time.sleep(0.1)

    def create_database(self, name: str) -> list[str]:
        """A new empty database; its URL on each node."""
        self.nodes[0].create_database(name)
        return [node.url(name) for node in self.nodes]

    def close(self) -> None:
        for node in self.nodes:
            node.close()
