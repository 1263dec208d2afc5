"""Regenerate reports/ from the shared vaults with the tool itself (never edit the reports by hand).

    python scripts/make_reports.py [--skip-eval] [--answers [--per-tier N]]

Bundles and indexes go to out/reports-work/ (ignored by git); reports/ receives:
- link-health-<vault>.md / .json / .html for every shared vault;
- eval-<vault>.md / .json / .png / -frontier.png / .html: every method and neighbour ranker on every golden set
  (golden/<vault>.jsonl, offline MiniLM);
- eval-<vault>-extract.*: `--llm extract`'s answers to every question of every golden set;
- with --answers, eval-<vault>-agent.*: the Gemma 3 270M GGUF's single-shot answers against its agent loop on a
  declared subset of every golden set (the first N questions of each tier, `--per-tier`, default 2: a 270M
  answer takes 20-100 s on two cores, the agent's two to four times that);
- ranker-selection.md: the default search chosen blind, leave one vault out (scripts/select_default.py, which
  reuses its cached scores in out/reports-work/selection-<vault>.json when they exist).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VAULTS = ROOT.parent / "shared" / "vaults"
WORK = ROOT / "out" / "reports-work"
REPORTS = ROOT / "reports"
EVALS = sorted(p.stem for p in (ROOT / "golden").glob("*.jsonl"))  # every golden set, named after its vault


def cli(*args: str) -> None:
    exe = Path(sys.executable).with_name("vault2okf")
    print("+ vault2okf", " ".join(args), flush=True)
    subprocess.run([str(exe), *args], check=True, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-eval", action="store_true")
    parser.add_argument("--answers", action="store_true")
    parser.add_argument("--per-tier", type=int, default=2, help="Questions per tier for the 270M answers.")
    args = parser.parse_args()
    REPORTS.mkdir(exist_ok=True)
    for vault in sorted(p.name for p in VAULTS.iterdir() if p.is_dir()):
        bundle = WORK / vault
        cli("convert", str(VAULTS / vault), "-o", str(bundle))
        for ext in ("md", "json", "html"):
            shutil.copyfile(bundle / f"link-health.{ext}", REPORTS / f"link-health-{vault}.{ext}")
    if args.skip_eval:
        return
    for vault in EVALS:
        bundle = WORK / vault
        cli("index", str(bundle), "--embedder", "minilm", "--no-progress")
        cli("eval", str(bundle), "--golden", f"golden/{vault}.jsonl", "--out", "reports",
            "--stem", f"eval-{vault}", "--rankers", "all")  # fmt: skip
        cli("eval", str(bundle), "--golden", f"golden/{vault}.jsonl", "--out", "reports",
            "--stem", f"eval-{vault}-extract", "--answers", "--llm", "extract")  # fmt: skip
    for vault in EVALS if args.answers else ():
        cli("eval", str(WORK / vault), "--golden", f"golden/{vault}.jsonl", "--out", "reports",
            "--stem", f"eval-{vault}-agent", "--answers", "--agent", "--answer-tokens", "96",
            "--per-tier", str(args.per_tier))  # fmt: skip
    selection = [sys.executable, str(ROOT / "scripts" / "select_default.py"), "--work", str(WORK), "--reuse"]
    subprocess.run(selection, check=True, cwd=ROOT)


if __name__ == "__main__":
    main()
