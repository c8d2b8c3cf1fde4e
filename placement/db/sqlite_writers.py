"""The writers of one SQLite file take turns, across threads and processes,
without polling.

SQLite lets one writer at a time into a database; the others wait in its
busy handler, which sleeps between tries (1 ms at first, up to 100 ms), so a
waiting writer often sleeps on long after the lock was released, while the
process that holds it may take it again and again: writes of two uwsgi
workers stalled for up to two seconds. Here writers queue instead: the
threads of a process on a lock, then the processes on an ``flock`` of a file
next to the database, which the kernel gives to the next waiter as soon as
it is released. SQLite's own locking still guards the data (and other
writers, such as a migration); the queue only spares the polling.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator

# The threads of this process writing each database file (by absolute path;
# None: in-memory databases). Keyed by process too: a forked process must
# not inherit a lock that one of its parent's threads held.
_thread_queues: dict[tuple[int, str | None], threading.Lock] = {}
_thread_queues_lock = threading.Lock()


def lock_path(database_path: str) -> str:
    """The file whose flock orders the writers of the database."""
    return os.path.abspath(database_path) + "-writers.lock"


def _thread_queue(database_path: str | None) -> threading.Lock:
    key = (os.getpid(), database_path and os.path.abspath(database_path))
    with _thread_queues_lock:
        return _thread_queues.setdefault(key, threading.Lock())


@contextlib.contextmanager
def turn(database_path: str | None) -> Iterator[None]:
    """Wait for the turn of this writer of the SQLite file at
    ``database_path`` (None: an in-memory database, which only the threads
    of this process share) and hold it for the block."""
    with _thread_queue(database_path):
        if database_path is None:
            yield
            return
        # Opened for each turn, so that no process shares it (and its flock)
        # with another, forked or not; read-only is enough for flock, so a
        # file created by another user (root running placement-manage)
        # serves everyone. Closing it releases the turn.
        lock_file = os.open(lock_path(database_path), os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC,
                            0o644)
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            yield
        finally:
            os.close(lock_file)
