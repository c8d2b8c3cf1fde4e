"""A fresh database and a service process serving it, on 127.0.0.1 only."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

from placement.db import server_databases

BACKENDS = ("sqlite", "mysql", "postgresql")
DEFAULT_SERVER_CMD = f"{shlex.quote(sys.executable)} -m placement.cmd.api --port {{port}}"
# Administrative connections to the servers on 127.0.0.1 (the database part
# is PostgreSQL's maintenance database).
_ADMIN_URLS = {
    "mysql": "mysql+pymysql://root@127.0.0.1/",
    "postgresql": "postgresql+psycopg://postgres@127.0.0.1/postgres",
}


class FreshDatabase:
    """An empty database created for one run and dropped afterwards.

    SQLite: a file in a temporary directory. MariaDB / PostgreSQL: a new
    database named ``placement_bench_<random>`` on the server at 127.0.0.1,
    made as the tests make theirs (placement/db/server_databases.py).
    The service migrates it itself (``sync_on_startup``).
    """

    def __init__(self, backend: str, workdir: str) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; one of {', '.join(BACKENDS)}")
        self.backend = backend
        self.name = "placement_bench_" + uuid.uuid4().hex[:12]
        if backend == "sqlite":
            self.url = "sqlite:///" + os.path.join(workdir, self.name + ".sqlite")
        else:
            self.url = server_databases.create_database(_ADMIN_URLS[backend], self.name)

    def drop(self) -> None:
        if self.backend != "sqlite":
            server_databases.drop_database(_ADMIN_URLS[self.backend], self.name)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """The service started with ``command`` (``{port}``, ``{host}`` and
    ``{workdir}``, the run's scratch directory, substituted: a server can
    keep its Unix sockets there), configured only through
    ``OS_<GROUP>__<OPTION>`` environment variables."""

    def __init__(self, command: str, database_url: str, workdir: str,
                 startup_timeout: float = 120.0) -> None:
        self.port = free_port()
        self.host = "127.0.0.1"
        self.command = shlex.split(command.format(port=self.port, host=self.host,
                                                   workdir=workdir))
        self.log_path = os.path.join(workdir, f"server-{self.port}.log")
        # Never let a configuration file of the machine leak in: an empty
        # one of our own (the original service refuses a directory without).
        config_dir = tempfile.mkdtemp(dir=workdir)
        open(os.path.join(config_dir, "placement.conf"), "w").close()
        env = dict(os.environ)
        env.update({
            "OS_PLACEMENT_DATABASE__CONNECTION": database_url,
            "OS_PLACEMENT_DATABASE__SYNC_ON_STARTUP": "True",
            "OS_API__AUTH_STRATEGY": "noauth2",
            "OS_PLACEMENT_CONFIG_DIR": config_dir,
        })
        self._log = open(self.log_path, "wb")
        # Its own session, so that stopping it also stops its workers.
        self.process = subprocess.Popen(self.command, env=env, stdout=self._log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
        try:
            self._wait_until_ready(startup_timeout)
        except BaseException:
            self.stop()
            raise

    def _wait_until_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://{self.host}:{self.port}/"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}; "
                                   f"log:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"server not ready after {timeout:.0f}s; log:\n{self.log_tail()}")

    def log_tail(self, size: int = 4000) -> str:
        self._log.flush()
        with open(self.log_path, "rb") as log:
            return log.read()[-size:].decode(errors="replace")

    def cpu_seconds(self) -> float:
        """CPU time (user + system) used so far by the server and its workers:
        on a shared machine this is steadier than wall-clock latency."""
        ticks = 0
        for pid in [self.process.pid, *_descendants(self.process.pid)]:
            try:
                with open(f"/proc/{pid}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            # utime and stime are fields 14 and 15 of stat(5); the split
            # above starts at field 3.
            ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> list[float]:
        """Resident memory of each process of the server (the server, then
        its workers), in MiB."""
        sizes = []
        for pid in [self.process.pid, *_descendants(self.process.pid)]:
            try:
                with open(f"/proc/{pid}/status") as status:
                    for line in status:
                        if line.startswith("VmRSS:"):
                            sizes.append(round(int(line.split()[1]) / 1024, 1))
            except OSError:
                continue
        return sizes

    @contextlib.contextmanager
    def profiled(self, output_path: str | None):
        """Sample the server (and its workers) with py-spy while the block
        runs; the collapsed stacks go to ``output_path`` (nothing when None)."""
        if output_path is None:
            yield
            return
        py_spy = shutil.which("py-spy")
        if py_spy is None:
            raise RuntimeError("--profile needs py-spy (pip install py-spy)")
        profiler = subprocess.Popen(
            [py_spy, "record", "--pid", str(self.process.pid), "--subprocesses",
             "--format", "raw", "--rate", "200", "--output", output_path],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # attaching takes a moment
        try:
            yield
        finally:
            profiler.send_signal(signal.SIGINT)
            try:
                profiler.wait(timeout=30)
            except subprocess.TimeoutExpired:
                profiler.kill()
                profiler.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._log.close()


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                # The command name (field 2) may contain spaces; it ends at ')'.
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, pending = [], [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found
