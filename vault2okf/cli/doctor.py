"""``vault2okf doctor``: the install's checks (``vault2okf.doctor``), printed."""

from __future__ import annotations

from pathlib import Path

import typer


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
