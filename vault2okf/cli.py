"""The console command ``vault2okf``: the composition root, the only module that imports every package.

It holds the one error handler: a library error (each package's base exception) is printed as one line
``Error: <message>`` with exit status 1; usage errors (a bad option or argument) keep click's exit status 2.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from eval.errors import EvalError
from retriever.errors import RetrieverError
from vault2okf.errors import Vault2OkfError

LIBRARY_ERRORS = (Vault2OkfError, RetrieverError, EvalError, OSError)  # OSError: disk full, permission denied...


class _Commands(TyperGroup):
    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except LIBRARY_ERRORS as exc:
            typer.echo(f"Error: {exc}", err=True)
            raise typer.Exit(1) from None


app = typer.Typer(
    cls=_Commands,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # plain click output: an error is one line, not a box
    pretty_exceptions_enable=False,
    help="Obsidian vault -> OKF bundle, questions, evaluation.",
)


def _mount() -> None:
    """Mount the retriever's and the harness's thin commands (imported lazily inside each command)."""
    from eval.cli import eval_cmd
    from retriever.chat import chat_cmd
    from retriever.cli import ask_cmd, index_cmd, search_cmd
    from retriever.embed import check_embedder
    from retriever.index import index_bundle
    from retriever.mcp_server import mcp_cmd
    from vault2okf.commands import convert_cmd, links_cmd
    from vault2okf.watch import watch_command

    app.command("convert")(convert_cmd)
    app.command("links")(links_cmd)
    app.command("index")(index_cmd)
    app.command("search")(search_cmd)
    app.command("ask")(ask_cmd)
    app.command("chat")(chat_cmd)
    app.command("eval")(eval_cmd)
    app.command("mcp")(mcp_cmd)
    app.command("watch")(watch_command(index_bundle, check_embedder))


_mount()
