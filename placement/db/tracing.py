"""What ``[placement_database] connection_debug`` and ``connection_trace``
turn on: statements logged, and statements commented with the code of
placement that ran them (a slow query in the database's log then names
its caller)."""

from __future__ import annotations

import logging as std_logging
import os
import sys

import sqlalchemy as sa
from sqlalchemy import event


def log_statements(connection_debug: int) -> None:
    """``[placement_database] connection_debug``: SQLAlchemy logs each
    statement at INFO, and each row at DEBUG, when its logger allows it (as
    oslo.db sets it: 50 and above INFO, 100 DEBUG)."""
    if connection_debug >= 100:
        std_logging.getLogger("sqlalchemy.engine").setLevel(std_logging.DEBUG)
    elif connection_debug >= 50:
        std_logging.getLogger("sqlalchemy.engine").setLevel(std_logging.INFO)


# Where the placement package is, to tell placement's frames from the
# libraries' and name them from the package ("placement/db/migration.py").
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PACKAGE_DIR = os.path.join(_PACKAGE_PARENT, "placement") + os.sep
# How many of placement's innermost frames a traced statement names.
TRACE_FRAMES = 3
# Frames of the layer that runs every statement: not named.
_DATABASE_LAYER = frozenset({__file__, os.path.join(os.path.dirname(__file__), "api.py")})


def _traced(_connection, _cursor, statement: str, parameters, _context, _many
            ) -> tuple[str, object]:
    """A ``before_cursor_execute`` listener (``connection_trace``): the
    statement with a comment naming placement's code that ran it, innermost
    first, outside the database layer."""
    frames = []
    frame = sys._getframe(1)
    while frame is not None and len(frames) < TRACE_FRAMES:
        path = frame.f_code.co_filename
        if path.startswith(_PACKAGE_DIR) and path not in _DATABASE_LAYER:
            frames.append(f"{os.path.relpath(path, _PACKAGE_PARENT)}:{frame.f_lineno} "
                          f"{frame.f_code.co_name}")
        frame = frame.f_back
    # No "%" (the drivers' parameter markers) nor "*/" in the comment.
    comment = "; ".join(frames).replace("%", "").replace("*/", "")
    return f"{statement}\n/* {comment} */", parameters


def trace_statements(engine: sa.engine.Engine) -> None:
    """Comment each statement of ``engine`` with placement's frames that
    ran it (``_traced``)."""
    event.listen(engine, "before_cursor_execute", _traced, retval=True)
