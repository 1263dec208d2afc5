"""``vault2okf doctor``: the install's checks (``vault2okf.doctor``), printed."""

from __future__ import annotations

from pathlib import Path

import typer


def doctor_cmd(
    model: Path | None = typer.Option(
        None, "--model", help="The GGUF to test-decode (default: the local model ask uses)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the checks as JSON."),
    bundle: Path | None = typer.Option(
        None, "--bundle", help="Also estimate how long indexing this bundle takes with its embedder, here."
    ),
) -> None:
    """Check this install: Python and packages, the llama.cpp build against this CPU (a tiny decode in a child
    process), the embedder weights, Chroma's telemetry. Exit 1 when something must be fixed."""
    import json

    from vault2okf.doctor import as_json as checks_json
    from vault2okf.doctor import render, run_checks

    if bundle is not None and not (bundle / "okf.duckdb").is_file():
        typer.echo(f"Error: {bundle} is not a bundle (no okf.duckdb): give one `vault2okf convert` wrote", err=True)
        raise typer.Exit(1)
    checks = run_checks(model, bundle)
    report = checks_json(checks)
    typer.echo(json.dumps(report, indent=2) if as_json else render(checks))
    if not report["ok"]:
        raise typer.Exit(1)
