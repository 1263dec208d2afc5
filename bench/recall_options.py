"""Recall of the default search and of each retrieval option against vector@k, at budgets matched to vector@k.

    python bench/recall_options.py --bundles DIR [--vaults a,b] [--options runs,mention_edges,k=5+runs] [--reuse]

DIR holds each vault's bundle, converted and indexed with MiniLM (``DIR/<vault>``, as ``scripts/select_default.py``
makes them). For k in 5, 10 and 15 it runs ``vector@k`` and the default search with its hop capped at vector@k's
tokens (``default@k``: ``Budget(notes=15, tokens=6000, match=k)``), then the default with each option on at the
same budget (``default+OPTION@k``), on every question of ``golden/<vault>.jsonl``; scores are cached per method in
``DIR/options-<vault>.json`` (``--reuse`` searches only what the cache lacks). Prints recall per tier and overall,
and mean notes and tokens, per vault, with the machine's load beside them.
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

from eval.golden import load_golden  # noqa: E402
from eval.metrics import per_question, summarise  # noqa: E402
from eval.run import Method, run_methods  # noqa: E402
from retriever.retrieve import DEFAULT_SPEC, Budget, Mode, Retriever, SearchSpec  # noqa: E402

KS = (5, 10, 15)
TIERS = ("lookup", "synthesis", "temporal")


def methods(options: list[str]) -> list[Method]:
    out = []
    for k in KS:
        budget = replace(DEFAULT_SPEC.budget, match=k)
        out.append(Method(f"vector@{k}", SearchSpec(Mode.VECTOR, k)))
        out.append(Method(f"default@{k}", replace(DEFAULT_SPEC, budget=budget)))
        for option in options:
            spec = replace(DEFAULT_SPEC, **{"budget": budget, **changes(option, budget)})
            out.append(Method(f"default+{option}@{k}", spec))
    return out


def changes(option: str, budget: Budget | None = None) -> dict[str, Any]:
    """``runs+k=5+no_twins`` -> {"runs": True, "k": 5, "twins": False}: flags switched on (off with ``no_``),
    ``name=int`` set; ``notes=N`` caps the context at N notes (``notes=0``: no note cap, tokens alone) in
    ``budget``."""
    out: dict[str, Any] = {}
    for part in option.split("+"):
        name, _, value = part.partition("=")
        if name.startswith("no_") and not value:
            out[name.removeprefix("no_")] = False
        elif name == "notes":
            out["budget"] = replace(budget or DEFAULT_SPEC.budget, notes=int(value) or None)
        else:
            out[name] = int(value) if value else True
    return out


def score(vault: str, bundles: Path, wanted: list[Method], reuse: bool) -> dict[str, Any]:
    cache = bundles / f"options-{vault}.json"
    questions = load_golden(ROOT / "golden" / f"{vault}.jsonl")
    ids = [q.id for q in questions]
    data = json.loads(cache.read_text("utf-8")) if reuse and cache.exists() else {}
    if data.get("ids") != ids:
        data = {"ids": ids, "summaries": {}, "recall": {}}
    missing = [m for m in wanted if m.name not in data["summaries"]]
    if missing:
        print(f"{vault}: searching {len(missing)} methods", file=sys.stderr, flush=True)
        result = run_methods(Retriever.open(bundles / vault), questions, missing)
        rows = per_question(questions, result.run)
        data["summaries"].update(summarise(questions, result.run, result.budgets))
        data["recall"].update({m.name: {r["id"]: r["recall"][m.name] for r in rows} for m in missing})
        cache.write_text(json.dumps(data, indent=1) + "\n", "utf-8")
    return data


def table(vault: str, data: dict[str, Any], wanted: list[Method]) -> list[str]:
    lines = [f"## {vault}", "", "| method | lookup | synthesis | temporal | overall | notes | tokens |",
             "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for m in wanted:
        s = data["summaries"][m.name]
        cells = [f"{s['tiers'][t]['recall']:.3f}" if t in s["tiers"] else "—" for t in TIERS]
        b = s["budget"]
        lines.append(f"| {m.name} | " + " | ".join(cells) +
                     f" | {s['overall']['recall']:.3f} | {b['notes']:.1f} | {b['tokens']:,.0f} |")  # fmt: skip
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundles", type=Path, required=True)
    parser.add_argument("--vaults", default="")
    parser.add_argument("--options", default="")
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()
    vaults = args.vaults.split(",") if args.vaults else sorted(p.stem for p in (ROOT / "golden").glob("*.jsonl"))
    wanted = methods([o for o in args.options.split(",") if o])
    for vault in vaults:
        data = score(vault, args.bundles, wanted, args.reuse)
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print("\n".join(table(vault, data, wanted)) + f"(load average {load})\n", flush=True)


if __name__ == "__main__":
    main()
