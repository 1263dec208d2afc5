"""The console command ``vault2okf``: the composition root, the only module that imports every package.

It holds the one error handler: a library error (each package's base exception) is printed as one line
``Error: <message>`` with exit status 1; usage errors (a bad option or argument) keep click's exit status 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from eval.errors import EvalError
from retriever.errors import RetrieverError
from vault2okf.convert import convert
from vault2okf.errors import Vault2OkfError
from vault2okf.links import read_link_health

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


@app.command("convert")
def convert_cmd(
    vault: Path = typer.Argument(..., help="The Obsidian vault folder (read only, never modified)."),
    out: Path = typer.Option(..., "-o", "--out", help="The bundle folder to write (replaced atomically)."),
    config: Path | None = typer.Option(None, "--config", help="A vault2okf.toml (default: VAULT/vault2okf.toml)."),
    force: bool = typer.Option(False, "--force", help="Replace a bundle holding files vault2okf did not write."),
) -> None:
    """Convert VAULT into an OKF bundle with a link-health report and okf.duckdb."""
    result = convert(vault, out, config_path=config, force=force)
    t = result.report.to_json()["totals"]
    s = t["by_status"]
    typer.echo(
        f"{result.notes} notes, {result.links} links -> {result.out} in {result.seconds:.2f}s\n"
        f"broken {s['broken']} ({t['unique_targets']['broken']} targets), ambiguous {s['ambiguous']} "
        f"({t['unique_targets']['ambiguous']} targets), alias-only {s['alias']}, missing attachments "
        f"{s['missing_attachment']}; report: {result.out / 'link-health.md'}"
    )


@app.command("links")
def links_cmd(
    bundle: Path = typer.Argument(..., help="A bundle written by `vault2okf convert`."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Show the link-health report of BUNDLE."""
    typer.echo(read_link_health(bundle, as_json=as_json), nl=False)


def _mount() -> None:
    """Mount the retriever's and the harness's thin commands (imported lazily inside each command)."""
    from eval.cli import eval_cmd
    from retriever.cli import ask_cmd, index_cmd, search_cmd

    app.command("index")(index_cmd)
    app.command("search")(search_cmd)
    app.command("ask")(ask_cmd)
    app.command("eval")(eval_cmd)


_mount()
