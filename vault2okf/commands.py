"""Thin ``convert`` and ``links`` commands; ``vault2okf/cli.py`` mounts them on the console command."""

from __future__ import annotations

from pathlib import Path

import typer

from vault2okf.convert import convert
from vault2okf.links import read_link_health


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


def links_cmd(
    bundle: Path = typer.Argument(..., help="A bundle written by `vault2okf convert`."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Show the link-health report of BUNDLE."""
    typer.echo(read_link_health(bundle, as_json=as_json), nl=False)
