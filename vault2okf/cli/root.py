"""The typer application of ``vault2okf``: the composition root. This package (``vault2okf.cli``) is the only one
that imports every package: one module per command, the options they share in ``options.py``.

It holds the one error handler: a library error (each package's base exception) is printed as one line
``Error: <message>`` with exit status 1; usage errors (a bad option or argument) keep click's exit status 2.

Commands are mounted lazily: ``vault2okf search ...`` imports the module of ``search`` only, not those of
``convert`` (YAML, the walker), ``mcp`` (DuckDB's SQL tool, the MCP SDK) or ``eval`` (matplotlib). ``--help``
lists them all, and so imports them all. ``vault2okf.cli`` itself imports none of this until ``app`` is asked for
(`vault2okf.cli.main` answers a plain served search without typer).
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from typing import Any

import typer
from typer.core import TyperGroup

from vault2okf.protocol import BundleError

VERBOSE_ENV = "VAULT2OKF_VERBOSE"  # the same switches as retriever.embed's (this module must not import it)
DOWNLOAD_ENV = "VAULT2OKF_DOWNLOAD"
COMMANDS = {  # name: "module:function", each module in this package holding one command
    name: f"vault2okf.cli.{name}:{name}_cmd"
    for name in ("convert", "links", "index", "search", "ask", "chat", "eval", "mcp", "serve", "watch", "doctor")
}
SETTINGS: dict[str, Any] = {
    "add_completion": False,
    "rich_markup_mode": None,  # plain click output: an error is one line, not a box
    "pretty_exceptions_enable": False,
}


def _command(name: str) -> Any:
    """The click command of ``name``, its module imported now."""
    from vault2okf.cli.options import PanelledCommand

    module, function = COMMANDS[name].split(":")
    callback = getattr(importlib.import_module(module), function)
    one = typer.Typer(**SETTINGS)
    one.command(name, cls=PanelledCommand)(callback)
    return typer.main.get_command(one)


class _Commands(TyperGroup):
    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.commands[cmd_name] = _command(cmd_name)
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name = args[0] if args else ""
        if name and name not in COMMANDS and not name.startswith("-"):  # click's message, from the names alone
            matches = ", ".join(repr(m) for m in difflib.get_close_matches(name, list(COMMANDS)))
            ctx.fail(f"No such command {name!r}." + (f" Did you mean {matches}?" if matches else ""))
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            if not isinstance(exc, library_errors()):
                raise
            from vault2okf.cli.render import echo  # names in a message (a note's, a file's) print safely

            echo(f"Error: {exc}", err=True)
            raise typer.Exit(1) from None


def library_errors() -> tuple[type[Exception], ...]:
    """The bundle protocol's base error (``Vault2OkfError`` and ``RetrieverError`` derive from it), and OSError (disk
    full, permission denied...). ``EvalError`` once ``eval`` is imported: no eval error can be raised before, and
    importing the package costs a search its reports code."""
    evaluation = sys.modules.get("eval.errors")
    return (BundleError, OSError, *([evaluation.EvalError] if evaluation else []))


class _App(typer.Typer):
    """The console command: a plain ``search`` that a running ``vault2okf serve`` answers goes straight to it
    (`vault2okf.cli.served`), before typer parses the command line; everything else through typer."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from vault2okf.cli.served import Outcome, served_search

        if not args and kwargs.get("args") is None:
            outcome = served_search(sys.argv[1:])
            if outcome is Outcome.ANSWERED:
                return None
            if outcome is Outcome.IN_PROCESS:
                kwargs["args"] = [*sys.argv[1:], "--no-server"]
        return super().__call__(*args, **kwargs)


app = _App(
    cls=_Commands,
    no_args_is_help=True,
    help="Obsidian vault -> OKF bundle, questions, evaluation.",
    **SETTINGS,
)


@app.callback()
def _options(
    verbose: bool = typer.Option(
        False, "--verbose", help=f"Let model libraries print their progress bars and logs (or {VERBOSE_ENV}=1)."
    ),
    download: bool = typer.Option(
        False,
        "--download",
        help="Let the embedder download missing weights from the Hugging Face hub, and a command that answers with "
        "no --llm and no local model fetch the recommended Gemma 3 4B-it Q4_K_M GGUF, about 2.5 GB "
        f"(or {DOWNLOAD_ENV}=1).",
    ),
) -> None:
    """Obsidian vault -> OKF bundle, questions, evaluation."""
    if verbose:
        os.environ[VERBOSE_ENV] = "1"
    if download:
        os.environ[DOWNLOAD_ENV] = "1"
