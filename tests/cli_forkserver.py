"""The server behind :func:`tests.cli_process.run_cli`: imports the CLI's modules once, then forks
one child per request, each running ``extender.cli.main(argv)`` as ``python -m extender.cli`` would.

Protocol (one request at a time): a JSON line ``{"argv", "cwd", "stdout", "stderr"}`` on standard
input; the reply is the child's pid on a line, then, when it has exited, its exit code on a line
(negative: killed by that signal, as :mod:`subprocess` reports it).
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import sys
import threading
import traceback
from typing import Any

# what the CLI imports before it runs (every subcommand's module: its parser is built from all of
# them) and what `simulate` imports to run: importing them here once is all the saving
PRELOAD = ("extender.simulate.runner", "extender.simulate.render", "extender.simulate.svg")


def _exit_code(exc: SystemExit) -> int:
    """What the interpreter makes of ``SystemExit(code)``."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def _run(request: dict[str, Any]) -> int:
    """In the child: standard streams onto the request's files, then the CLI."""
    os.chdir(request["cwd"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 (the process's own streams)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.argv = ["sky-scheduler", *request["argv"]]
    from extender.cli import main

    try:
        code = main(request["argv"])
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def _exit(code: int) -> None:
    """End the child as the interpreter ends after ``python -m``: non-daemon threads joined, atexit
    handlers run, streams flushed; then leave without tearing down every module one by one (that
    teardown only frees memory, and would touch every page the child shares with the server)."""
    threading._shutdown()  # type: ignore[attr-defined]  # what Py_FinalizeEx calls first
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code & 0xFF)


def serve() -> None:
    from extender.cli import COMMANDS

    for module in (*(m for m, _ in COMMANDS.values()), *PRELOAD):
        importlib.import_module(module)
    gc.freeze()  # the imported objects stay out of the children's collections: no copy-on-write for them
    replies = os.fdopen(os.dup(1), "w")
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _exit(_run(request))
        replies.write(f"{pid}\n")
        replies.flush()
        _, status = os.waitpid(pid, 0)
        replies.write(f"{os.waitstatus_to_exitcode(status)}\n")
        replies.flush()


if __name__ == "__main__":
    serve()
