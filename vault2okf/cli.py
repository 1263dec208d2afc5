"""The console command ``vault2okf``: the composition root, the only module that imports every package."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from vault2okf.convert import convert
from vault2okf.errors import Vault2OkfError

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Obsidian vault -> OKF bundle, questions, evaluation."
)


@app.command("convert")
def convert_cmd(
    vault: Path = typer.Argument(..., help="The Obsidian vault folder (read only, never modified)."),
    out: Path = typer.Option(..., "-o", "--out", help="The bundle folder to write (replaced atomically)."),
    config: Path | None = typer.Option(None, "--config", help="A vault2okf.toml (default: VAULT/vault2okf.toml)."),
) -> None:
    """Convert VAULT into an OKF bundle with a link-health report and okf.duckdb."""
    try:
        result = convert(vault, out, config_path=config)
    except Vault2OkfError as exc:
        raise typer.BadParameter(str(exc)) from None
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
    path = bundle / ("link-health.json" if as_json else "link-health.md")
    if not path.is_file():
        raise typer.BadParameter(f"no link-health report in {bundle}: run `vault2okf convert VAULT -o {bundle}` first")
    text = path.read_text("utf-8")
    typer.echo(json.dumps(json.loads(text), indent=2, ensure_ascii=False) if as_json else text, nl=False)


def _mount() -> None:
    """Mount the retriever's and the harness's thin commands (imported lazily inside each command)."""
    from eval.cli import eval_cmd
    from retriever.cli import ask_cmd, index_cmd, search_cmd

    app.command("index")(index_cmd)
    app.command("search")(search_cmd)
    app.command("ask")(ask_cmd)
    app.command("eval")(eval_cmd)


_mount()
