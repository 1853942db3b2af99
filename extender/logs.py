"""Process logging for every entry point: text or one JSON object per line, levels in any case.

``setup_logging("INFO", "json")`` makes each record one line such as ::

    {"time":"2026-12-01T20:41:07.125Z","level":"info","logger":"extender.binder.loop",
     "message":"quota q-7 bound to n3","quota":"q-7","job":"ml/llama","node":"n3"}

Fields a call passes through ``extra=`` (``log.info("…", extra={"quota": q, "job": key})``) become
members of the object, so a log pipeline can filter on ``quota``, ``job``, ``node``, ``pod``,
``queue`` without parsing messages; an exception adds ``exc_info`` (the formatted traceback).

A stdlib formatter rather than python-json-logger: this is the whole of what the service needs
(about twenty lines), and a dependency for it would be one more package to pin and audit.

``setup_logging(…, background=True)`` (the service) formats and writes the records on a thread of
their own (the logging cookbook's QueueHandler / QueueListener): a call on the event loop only
renders the message and queues the record, so a slow reader of stderr (a full pipe, a busy log
agent) never stalls the loop. Measured on ``bench/service_burst.py``'s burst, where the binder logs
one line per quota it binds: with the handler on the loop, 8–68 % of the loop's busy time during
the writes was the write to stderr, depending on how fast the reader drained the pipe.
"""

from __future__ import annotations

import atexit
import copy
import logging
import queue
import sys
import time
from logging.handlers import QueueHandler, QueueListener
from typing import Any, Final

import orjson

__all__ = ["LEVELS", "LOG_FORMATS", "JsonFormatter", "parse_level", "setup_logging"]

LEVELS: Final = ("debug", "info", "warning", "error")
LOG_FORMATS: Final = ("text", "json")
TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# the attributes every LogRecord has: anything else on a record came from ``extra=``
_STANDARD: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


def parse_level(value: str) -> int:
    """``"info"``, ``"INFO"``, ``"Info"`` → ``logging.INFO``; ValueError naming the choices otherwise."""
    name = value.strip().lower()
    if name not in LEVELS:
        raise ValueError(f"log level {value!r} is not one of {', '.join(LEVELS)} (any case)")
    level: int = getattr(logging, name.upper())
    return level


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ms), level, logger, message, the ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:  # rendered before it was queued (background logging)
            out["exc_info"] = record.exc_text
        return orjson.dumps(out, default=str).decode()


class _Enqueue(QueueHandler):
    """Queues a record for the listener thread, rendered as far as it must be on the caller's
    thread: the message (its arguments may change after the call returns) and the traceback
    (the exception's frames are the caller's). The formatter itself runs on the listener."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        out = copy.copy(record)
        out.msg = out.message = record.getMessage()
        out.args = None
        if record.exc_info:
            if not out.exc_text:
                out.exc_text = _TRACEBACKS.formatException(record.exc_info)
            out.exc_info = None
        return out


_TRACEBACKS: Final = logging.Formatter()
_listener: QueueListener | None = None


def _stop_listener() -> None:
    """Write out every queued record and let the listener thread go (idempotent)."""
    global _listener
    if _listener is not None:
        _listener.stop()
        _listener = None


def setup_logging(level: str, fmt: str = "text", *, background: bool = False) -> None:
    """Configure the root logger once per process (stderr): ``level`` in any case, ``fmt`` text or
    json. ``background``: records are written by a listener thread (see the module's docstring);
    whatever is queued is written out at exit, and by the next ``setup_logging``."""
    global _listener
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format {fmt!r} is not one of {', '.join(LOG_FORMATS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    _stop_listener()
    for old in list(root.handlers):
        root.removeHandler(old)
    if background:
        records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
        _listener = QueueListener(records, handler)
        _listener.start()
        atexit.unregister(_stop_listener)
        atexit.register(_stop_listener)
        root.addHandler(_Enqueue(records))
    else:
        root.addHandler(handler)
    root.setLevel(parse_level(level))
