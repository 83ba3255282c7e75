"""structlog: console renderer in development, JSON otherwise.

A request id (HTTP) or run id (agent turn) is bound through structlog's
contextvars so every log line of that request or turn carries it.
"""
from __future__ import annotations

import logging
import sys

import structlog
from structlog.typing import Processor


def configure(*, level: str = "INFO", fmt: str = "console") -> None:
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    renderer = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info if fmt == "json" else (lambda _l, _m, e: e),
            renderer,
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("daphne", "twisted", "asyncio", "httpx", "httpcore", "celery", "kombu", "asyncssh"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
    asyncio_logger = logging.getLogger("asyncio")
    if not any(isinstance(f, _ClientWentAway) for f in asyncio_logger.filters):
        asyncio_logger.addFilter(_ClientWentAway())


class _ClientWentAway(logging.Filter):
    """Drop asyncio's "Task exception was never retrieved" for Django's RequestAborted.

    When a client disconnects and daphne then cancels the request's application instance (on
    shutdown, or after its close timeout), Django's handler is cancelled before it collects its
    ``listen_for_disconnect`` task, whose RequestAborted is then reported with a traceback. A
    client that went away is not an error of Navi's.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        from django.core.exceptions import RequestAborted

        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, RequestAborted)
