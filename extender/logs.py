"""Process logging for every entry point: text or one JSON object per line, levels in any case.

``setup_logging("INFO", "json")`` makes each record one line such as ::

    {"time":"2026-12-01T20:41:07.125Z","level":"info","logger":"extender.binder.loop",
     "message":"quota q-7 bound to n3","quota":"q-7","job":"ml/llama","node":"n3"}

Fields a call passes through ``extra=`` (``log.info("…", extra={"quota": q, "job": key})``) become
members of the object, so a log pipeline can filter on ``quota``, ``job``, ``node``, ``pod``,
``queue`` without parsing messages; an exception adds ``exc_info`` (the formatted traceback).

A stdlib formatter rather than python-json-logger: this is the whole of what the service needs
(about twenty lines), and a dependency for it would be one more package to pin and audit.
"""

from __future__ import annotations

import logging
import sys
import time
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
        return orjson.dumps(out, default=str).decode()


def setup_logging(level: str, fmt: str = "text") -> None:
    """Configure the root logger once per process (stderr): ``level`` in any case, ``fmt`` text or json."""
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format {fmt!r} is not one of {', '.join(LOG_FORMATS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(parse_level(level))
