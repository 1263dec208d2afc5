"""The answer side of a retrieval option: `--llm extract`'s quotes from the default's context and from the default
with an option on, on the same questions (issue 37: shorter passages could buy recall with worse answers).

    python bench/answer_options.py --bundles DIR --vaults a,b --options passage=100 [--k 15] [--out FILE]

DIR holds each vault's bundle, converted and indexed with MiniLM (``DIR/<vault>``). For each vault it runs the
default search (``DEFAULT_SPEC``, matched to vector@k) and the default with each option (``bench/recall_options.py``
spells them), answers every question of ``golden/<vault>.jsonl`` from each method's context with the extract
answerer, the way `eval --answers --llm extract` does, and prints per tier the counts of the eval report's "Support"
table (answerable questions a strong quote answers from a gold note, those any quote does; unanswerable ones
answered strong) beside recall and mean context tokens, with the machine's load. Each method's summaries are
kept in ``DIR/answers-<vault>.json`` (``scripts/select_frontier.py --answers`` reads them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.recall_options import changes  # noqa: E402
from eval.golden import load_golden  # noqa: E402
from eval.metrics import summarise  # noqa: E402
from eval.run import Method, run_methods  # noqa: E402
from eval.scoring import score_answer, summarise_answers  # noqa: E402
from retriever.answer.backends import AnswerSpec, Backend  # noqa: E402
from retriever.asker import Asker  # noqa: E402
from retriever.retrieve import DEFAULT_SPEC, Retriever  # noqa: E402

TIERS = ("lookup", "synthesis", "temporal", "unanswerable")


def methods(options: list[str], k: int) -> list[Method]:
    budget = replace(DEFAULT_SPEC.budget, match=k)
    out = [Method(f"default@{k}", replace(DEFAULT_SPEC, budget=budget))]
    for option in options:
        out.append(Method(f"default+{option}@{k}", replace(DEFAULT_SPEC, **{"budget": budget,
                                                                           **changes(option, budget)})))  # fmt: skip
    return out


def measure(vault: str, bundles: Path, wanted: list[Method]) -> dict[str, Any]:
    """Per method: the recall summary and the extract answers' summary."""
    questions = load_golden(ROOT / "golden" / f"{vault}.jsonl")
    retriever = Retriever.open(bundles / vault)
    result = run_methods(retriever, questions, wanted)
    recall = summarise(questions, result.run, result.budgets)
    asker = Asker(retriever, DEFAULT_SPEC, AnswerSpec.of(Backend.EXTRACT))  # answers from retrievals made here
    vocabulary = {c.title for c in retriever.graph.concepts.values()}
    vocabulary |= {a for c in retriever.graph.concepts.values() for a in c.aliases}
    out = {}
    for m in wanted:
        scored = {}
        for q in questions:
            asked = asker.answer_from(q.question, result.retrievals[m.name][q.id])
            scored[q.id] = score_answer(asked.answer, q, known_entities=vocabulary, context=asked.context)
        out[m.name] = {"recall": recall[m.name], "answers": summarise_answers(scored, questions)}
    return out


def table(vault: str, data: dict[str, Any]) -> list[str]:
    lines = [f"## {vault}", "", "| method | tier | recall | a strong quote cites gold | any quote cites gold | "
             "unanswerable answered strong | tokens |", "|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name, d in data.items():
        recall, answers = d["recall"], d["answers"]
        for tier in [*TIERS, "all"]:
            a = answers["all"] if tier == "all" else answers["tiers"].get(tier)
            if a is None:
                continue
            answerable = a["n"] - a["unanswerable"]
            r = recall["overall"] if tier == "all" else recall["tiers"].get(tier)
            cell = f"{r['recall']:.3f}" if r and tier != "unanswerable" else "—"
            wrong = f"{a['answered_strong']} of {a['unanswerable']}" if a["unanswerable"] else "—"
            tokens = f"{recall['budget']['tokens']:,.0f}" if tier == "all" else ""
            lines.append(f"| {name} | {tier} | {cell} | {a['strong_gold']} of {answerable} | "
                         f"{a['marked_gold']} of {answerable} | {wrong} | {tokens} |")  # fmt: skip
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundles", type=Path, required=True)
    parser.add_argument("--vaults", required=True)
    parser.add_argument("--options", required=True)
    parser.add_argument("--k", type=int, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    wanted = methods([o for o in args.options.split(",") if o], args.k)
    lines = ["# The answer side of retrieval options (bench/answer_options.py)", "",
             f"`--llm extract` answering from each method's context at a budget matched to vector@{args.k}; "
             "counts as in the eval report's Support table; recall overall and per tier; mean context tokens.",
             ""]  # fmt: skip
    for vault in args.vaults.split(","):
        data = measure(vault, args.bundles, wanted)
        cache = args.bundles / f"answers-{vault}.json"
        saved = json.loads(cache.read_text("utf-8")) if cache.exists() else {}
        cache.write_text(json.dumps({**saved, **data}, indent=1) + "\n", "utf-8")
        lines += table(vault, data)
        print("\n".join(table(vault, data)), flush=True)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines.append(f"(load average when written: {load})")
    print(lines[-1])
    if args.out:
        args.out.write_text("\n".join(lines) + "\n", "utf-8")


if __name__ == "__main__":
    main()
