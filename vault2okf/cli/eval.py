"""``vault2okf eval BUNDLE --golden SET``: retrieval (and answers) measured on a golden set; reports written."""

from __future__ import annotations

from pathlib import Path

import typer

from retriever.agent.spec import AgentSpec
from retriever.answer.backends import AnswerSpec
from vault2okf.cli.options import agent_options, answer_options, check_agent


@answer_options(answer_tokens=160)
@agent_options(agent_help="With --answers: also answer with the agent loop and compare it to single-shot.",
               steps_help="With --agent: most tool calls per answer.")  # fmt: skip
def eval_cmd(
    bundle: Path = typer.Argument(..., help="An indexed bundle (`vault2okf index`)."),
    golden: Path = typer.Option(..., "--golden", help="Golden set, JSON Lines (see golden/README.md)."),
    out: Path | None = typer.Option(
        None, "--out", help="Folder for the .md, .json, .png and .html report (default: BUNDLE/reports)."
    ),
    stem: str | None = typer.Option(None, "--stem", help="Report file name (default: eval-<golden name>)."),
    rankers: str = typer.Option(
        "", "--rankers", help="Also run union with these neighbour rankers (comma list, or 'all')."
    ),
    answers: bool = typer.Option(False, "--answers", help="Also generate and score answers (slow)."),
    answer_method: str = typer.Option("default", "--answer-method", help="Which method's context to answer from."),
    per_tier: int | None = typer.Option(
        None, "--per-tier", min=1, help="Only the first N questions of each tier (a quick, declared subset)."
    ),
    *,
    answer: AnswerSpec,
    agent: AgentSpec | None,
) -> None:
    """Compare vector top-k, graph walk and union on a golden set, at matched budgets; write reports."""
    from eval.harness import evaluate

    check_agent(agent, answer)
    out_dir = out if out is not None else bundle / "reports"  # never the project's own reports/ by default
    _check_writable(out_dir, default=out is None)
    paths, summary = evaluate(
        bundle, golden, out_dir, stem or f"eval-{golden.stem}", rankers=rankers,
        answer=answer if answers else None, answer_method=answer_method, agent=agent,
        progress=lambda msg: typer.echo(msg, err=True), per_tier=per_tier,
    )  # fmt: skip
    typer.echo(summary)
    for path in paths:
        typer.echo(f"wrote {path}")


def _check_writable(out_dir: Path, *, default: bool) -> None:
    """The report folder can be written (it, or the nearest folder above it that exists): said before any work."""
    import os

    from vault2okf.errors import Vault2OkfError
    from vault2okf.protocol.disk import existing

    if out_dir.exists() and not out_dir.is_dir():
        raise Vault2OkfError(f"--out {out_dir} is a file: give a folder for the reports")
    where = existing(out_dir)
    if where.is_dir() and os.access(where, os.W_OK):
        return

    hint = " (a read-only bundle?): pass --out with a folder you can write" if default else ": choose another --out"
    raise Vault2OkfError(f"the report folder {out_dir} cannot be written{hint}")
