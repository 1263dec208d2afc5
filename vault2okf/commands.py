"""Thin ``convert`` and ``links`` commands; ``vault2okf/cli.py`` mounts them on the console command."""

from __future__ import annotations

from pathlib import Path

import typer

from vault2okf.convert import convert
from vault2okf.errors import Vault2OkfError
from vault2okf.links import diff_reports, load_report, open_html, overrides_toml, read_link_health


def convert_cmd(
    vault: Path = typer.Argument(..., help="The Obsidian vault folder (read only, never modified)."),
    out: Path = typer.Option(..., "-o", "--out", help="The bundle folder to write (replaced atomically)."),
    config: Path | None = typer.Option(None, "--config", help="A vault2okf.toml (default: VAULT/vault2okf.toml)."),
    force: bool = typer.Option(False, "--force", help="Replace a bundle holding files vault2okf did not write."),
    full: bool = typer.Option(
        False, "--full", help="Convert every note again, ignoring what the last convert of OUT left (its cache)."
    ),
) -> None:
    """Convert VAULT into an OKF bundle with a link-health report and okf.duckdb.

    A bundle converted before is updated: only the notes that changed (and those whose links they change)
    are converted again; the result is the bundle a full convert writes."""
    result = convert(vault, out, config_path=config, force=force, full=full)
    for notice in result.notices:
        typer.echo(f"note: {notice}", err=True)
    t = result.totals
    s, u = t["by_status"], t["unique_targets"]
    if result.unchanged:
        done = "nothing changed since the last convert; bundle left as it was"
    elif result.reused:
        done = f"{result.notes - result.reused} converted, {result.reused} unchanged"
    else:
        done = "all converted"
    typer.echo(
        f"{result.notes} notes, {result.links} links -> {result.out} in {result.seconds:.2f}s ({done})\n"
        f"broken {s['broken']} ({u['broken']} targets), ambiguous {s['ambiguous']} ({u['ambiguous']} targets), "
        f"alias-only {s['alias']}, overridden {s['overridden']}, excluded {s['excluded']}, missing attachments "
        f"{s['missing_attachment']}; report: {result.out / 'link-health.html'}"
    )


def links_cmd(
    bundle: Path = typer.Argument(..., help="A bundle written by `vault2okf convert`."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    open_: bool = typer.Option(False, "--open", help="Open link-health.html in the browser; print its path."),
    overrides: bool = typer.Option(
        False, "--overrides", help="Print a [links.overrides] table of the suggested fixes (> fixes.toml)."
    ),
    diff: Path | None = typer.Option(None, "--diff", help="Say what changed since OLD link-health.json."),
) -> None:
    """Show the link-health report of BUNDLE; or open it, write the fixes, or compare with an older report."""
    if sum((as_json, open_, overrides, diff is not None)) > 1:
        raise Vault2OkfError("give one of --json, --open, --overrides, --diff")
    if open_:
        typer.echo(open_html(bundle))
    elif overrides:
        typer.echo(overrides_toml(load_report(bundle)), nl=False)
    elif diff is not None:
        old = load_report(diff)  # checked before the bundle, so a bad OLD is named first
        typer.echo(diff_reports(old, load_report(bundle)), nl=False)
    else:
        typer.echo(read_link_health(bundle, as_json=as_json), nl=False)


def doctor_cmd(
    model: Path | None = typer.Option(
        None, "--model", help="The GGUF to test-decode (default: the local model ask uses)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the checks as JSON."),
) -> None:
    """Check this install: Python and packages, the llama.cpp build against this CPU (a tiny decode in a child
    process), the embedder weights, Chroma's telemetry. Exit 1 when something must be fixed."""
    import json

    from vault2okf.doctor import as_json as checks_json
    from vault2okf.doctor import render, run_checks

    checks = run_checks(model)
    report = checks_json(checks)
    typer.echo(json.dumps(report, indent=2) if as_json else render(checks))
    if not report["ok"]:
        raise typer.Exit(1)
