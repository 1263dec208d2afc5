"""The console command ``vault2okf``: ``main`` (the console script and ``python -m vault2okf``) and ``app``, the
typer application (`vault2okf.cli.root`, imported when first asked for: ``from vault2okf.cli import app``).

``main`` sends a plain ``search B Q [--json]`` to a running ``vault2okf serve`` before it imports typer
(`vault2okf.cli.served`): typer and its click take 0.05-0.1 s of a served search's whole command on two cores,
and such a search needs neither. Anything else runs through ``app``.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

# numpy's BLAS on one thread, set before anything imports numpy (a value the user set wins): every product the
# retriever computes with it is small (a question against the chunk table: ~1 ms), and on a few cores OpenBLAS's
# spinning threads fight torch's for them: warm search p50 44-74 -> 35 ms, CPU halved, on 2 cores.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

_console = False  # ``main`` runs the command: the process ends when it does (``ending``)


def ending() -> bool:
    """Does this process end when its command does (the console command, ``main``)? Not under a test's
    ``CliRunner``, which runs commands in its own long-lived process."""
    return _console


def main() -> None:
    """The console command: a plain search a running server answers, printed without typer; else ``app``."""
    global _console
    from vault2okf.cli.served import Outcome, served_search

    _console = True

    argv = sys.argv[1:]
    outcome = served_search(argv)
    if outcome is Outcome.ANSWERED:
        return
    from vault2okf.cli.root import app

    app(args=[*argv, "--no-server"] if outcome is Outcome.IN_PROCESS else argv, prog_name="vault2okf")


def __getattr__(name: str) -> Any:
    """``app``, ``COMMANDS`` and the rest of `vault2okf.cli.root`, imported on first use (a name of a module of this
    package is not asked of it: ``from vault2okf.cli import served`` imports no typer)."""
    if name.startswith("__") or (Path(__file__).parent / f"{name}.py").exists():
        raise AttributeError(f"module 'vault2okf.cli' has no attribute {name!r}")
    root = importlib.import_module("vault2okf.cli.root")
    try:
        return getattr(root, name)
    except AttributeError:
        raise AttributeError(f"module 'vault2okf.cli' has no attribute {name!r}") from None
