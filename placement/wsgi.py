"""The WSGI application for uwsgi, mod_wsgi or gunicorn:
``placement.wsgi:application``. Configuration comes from
``OS_PLACEMENT_CONFIG_DIR/placement.conf`` (or /etc/placement/placement.conf)
and ``OS_<GROUP>__<OPTION>`` environment variables."""

from __future__ import annotations

from oslo_log import log as logging

from placement import conf as placement_conf
from placement import deploy, middleware


def _served_by(application):
    """The application as the server running it needs it: under uwsgi, the
    router gets large answers in one piece (middleware.AnswerInOnePiece) and
    every answer's end before its request line is logged
    (middleware.HangUpBeforeClose)."""
    try:
        import uwsgi  # only importable inside uwsgi's processes
    except ImportError:
        return application
    return middleware.HangUpBeforeClose(
        middleware.AnswerInOnePiece(application, uwsgi.connection_fd), uwsgi.disconnect)


def init_application():
    conf = placement_conf.build_conf()
    logging.setup(conf, "placement")
    placement_conf.warn_of_unused_options(conf)
    # The addresses are the WSGI server's, unknown here: said even if loopback.
    deploy.warn_of_noauth2(conf, "the addresses its WSGI server was given")
    application = _served_by(deploy.build_app(conf, load_provider_copy=True))
    deploy.settle_memory()
    return application


application = init_application()
