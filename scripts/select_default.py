"""Choose the default search blind: leave one vault out, pick on the others, score on it (eval/select.py).

    python scripts/select_default.py [--work out/reports-work] [--vaults a,b] [--reuse]

For every golden set ``golden/<vault>.jsonl`` it converts ``../shared/vaults/<vault>`` into WORK/<vault> and indexes
it with the offline MiniLM (only changed notes are embedded again), runs ``vector@15`` and every
candidate on every question, and caches the scores in WORK/selection-<vault>.json (``--reuse`` reads those
and searches only for the candidates the cache does not hold, unless its questions are not the golden set's).
It writes reports/ranker-selection.md: every fold, then the choice on all vaults, with paired sign tests and
bootstrap intervals per vault and tier.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval.golden import load_golden  # noqa: E402
from eval.metrics import per_question, summarise  # noqa: E402
from eval.run import Method, run_methods  # noqa: E402
from eval.select import REFERENCE, Candidate, fold, margin, pick, tier_gains  # noqa: E402
from eval.stats import paired  # noqa: E402
from retriever.retrieve import Budget, Mode, Retriever, SearchSpec, Seeds  # noqa: E402

VAULTS = ROOT.parent / "shared" / "vaults"
REPORT = ROOT / "reports" / "ranker-selection.md"
RANKERS = ("lex-dense-hub", "lex-dense", "dense-hub")  # rrf and context embed every link sentence: too dear here
TOP_RANKERS = ("lex-dense-hub", "lex-dense")  # the structural choices the story-thread and phrase options join
ANALYTICS_RANKERS = ("lex-dense-pr", "lex-dense-comm", "lex-dense-hub-comm")  # graph-analytics priors on the hop
MATCH = 15
FLAGS = ("mentions", "named", "dedup", "threads", "phrases")


def candidates() -> list[Candidate]:
    """The grid of the first selection (96), then threads and phrases on its best structural choices (k=10, the
    lexical hop rankers, either seeds, with or without dedup), then the graph-analytics hop rankers on the best
    structures of that round (k=10, either seeds, dedup and phrases): the grid stays affordable on two cores."""
    out = [
        _candidate(k, seeds, ranker, mentions=m, named=n, dedup=d)
        for k, seeds, ranker, m, n, d in itertools.product(
            (5, 10), ("dense", "hybrid"), RANKERS, (False, True), (False, True), (False, True)
        )
    ]
    for seeds, ranker, dedup, (threads, phrases) in itertools.product(
        ("dense", "hybrid"), TOP_RANKERS, (False, True), ((True, False), (False, True), (True, True))
    ):
        out.append(_candidate(10, seeds, ranker, dedup=dedup, threads=threads, phrases=phrases))
    for seeds, ranker in itertools.product(("hybrid", "dense"), ANALYTICS_RANKERS):
        out.append(_candidate(10, seeds, ranker, dedup=True, phrases=True))
    return out


def _candidate(k: int, seeds: str, ranker: str, **flags: bool) -> Candidate:
    on = {f: flags.get(f, False) for f in FLAGS}
    name = f"union@{k}-{seeds}:{ranker}" + "".join(f"+{f}" for f in FLAGS if on[f])
    return Candidate(name, {"k": k, "seeds": seeds, "ranker": ranker, **on, "sessions": True})


def spec_of(c: Candidate) -> SearchSpec:
    o = c.options
    return SearchSpec(Mode.UNION, o["k"], Seeds(o["seeds"]), o["ranker"], o["sessions"], Budget(notes=15, match=MATCH),
                      **{f: o.get(f, False) for f in FLAGS})  # fmt: skip


def cli(*args: str) -> None:
    exe = Path(sys.executable).with_name("vault2okf")
    print("+ vault2okf", " ".join(args), flush=True)
    subprocess.run([str(exe), *args], check=True, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def score_vault(vault: str, work: Path, cands: list[Candidate], reuse: bool) -> dict[str, Any]:
    """The vault's scores: every method searched, or with ``reuse`` only those its cache does not hold."""
    cache = work / f"selection-{vault}.json"
    questions = load_golden(ROOT / "golden" / f"{vault}.jsonl")
    tiers = {q.id: q.tier.value for q in questions}
    cached = json.loads(cache.read_text("utf-8")) if reuse and cache.exists() else {}
    if cached.get("tiers") != tiers:  # no cache, or one of another golden set: search everything
        cached = {"summaries": {}, "recall": {}}
    methods = [Method(REFERENCE, SearchSpec(Mode.VECTOR, MATCH))] + [Method(c.name, spec_of(c)) for c in cands]
    missing = [m for m in methods if m.name not in cached["summaries"]]
    if not missing:
        return cached
    print(f"{vault}: searching {len(missing)} of {len(methods)} methods", flush=True)
    bundle = work / vault
    cli("convert", str(VAULTS / vault), "-o", str(bundle))  # cheap, and the graph is then this code's
    cli("index", str(bundle), "--embedder", "minilm", "--no-progress")  # returns at once when nothing changed
    result = run_methods(Retriever.open(bundle), questions, missing)
    rows = per_question(questions, result.run)
    data = {
        "vault": vault,
        "summaries": {**cached["summaries"], **summarise(questions, result.run, result.budgets)},
        "recall": {**cached["recall"], **{m.name: {r["id"]: r["recall"][m.name] for r in rows} for m in missing}},
        "tiers": tiers,
    }
    cache.write_text(json.dumps(data, indent=1) + "\n", "utf-8")
    return data


def paired_cells(data: dict[str, Any], method: str) -> list[str]:
    """Per tier and overall: gain, sign-test verdict, p, interval (answerable questions only)."""
    cells = []
    tiers = [t for t in ("lookup", "synthesis", "temporal") if t in set(data["tiers"].values())]
    for tier in [*tiers, "overall"]:
        ids = [q for q, t in data["tiers"].items() if tier == "overall" or t == tier]
        a = [data["recall"][method][q] for q in ids]
        b = [data["recall"][REFERENCE][q] for q in ids]
        p = paired(a, b)
        sig = p.verdict if p.verdict != "not significant" else "n.s."
        cells.append(f"{p.mean_diff:+.3f} ({p.wins}W/{p.losses}L, p={p.p_sign:.2f}, {sig})")
    return cells


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path, default=ROOT / "out" / "reports-work")
    parser.add_argument("--vaults", default="")
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()
    vaults = args.vaults.split(",") if args.vaults else sorted(p.stem for p in (ROOT / "golden").glob("*.jsonl"))
    args.work.mkdir(parents=True, exist_ok=True)
    cands = candidates()
    data = {v: score_vault(v, args.work, cands, args.reuse) for v in vaults}
    scores = {v: d["summaries"] for v, d in data.items()}
    REPORT.write_text(render(data, scores, cands), "utf-8")
    print(f"wrote {REPORT}")


def render(data: dict[str, Any], scores: dict[str, Any], cands: list[Candidate]) -> str:
    vaults = list(data)
    lines = [
        "# Choosing the default search, blind",
        "",
        "Generated by `scripts/select_default.py` (offline MiniLM embeddings; never edit by hand).",
        "",
        f"Every candidate is a union search whose hop is capped, question by question, at the tokens `{REFERENCE}` "
        f"spends on that question, and at 15 notes (`Budget(notes=15, match={MATCH})`); a candidate spending more "
        "tokens on average on any "
        "vault is out. A candidate's **margin** on a vault is its worst tier gain in recall over "
        f"`{REFERENCE}`: the smaller of the synthesis and temporal gains, and the lookup gain when it is a loss. "
        f"The pick maximises the worst vault's margin. {len(cands)} candidates: k in (5, 10), dense or hybrid "
        f"seeds, rankers {', '.join(RANKERS)}, with or without session mentions, named notes and note dedup; "
        f"then, at k=10 with rankers {', '.join(TOP_RANKERS)}, either seeds, with or without dedup: story threads "
        "across sessions (`+threads`), phrase-aware BM25 (`+phrases`) or both; then, at k=10 with dedup and "
        f"phrases, either seeds, the graph-analytics hop rankers {', '.join(ANALYTICS_RANKERS)} (a PageRank "
        "prior, a same-community bonus); adjacent sessions always offered.",
        "",
        "## Leave one vault out",
        "",
        "Each row picks on the other vaults and scores the pick on the held-out one: that column is the honest "
        "estimate of how the default does on a vault nobody tuned on.",
        "",
        "| held out | picked on the others | worst margin there | margin on held out | lookup | synthesis "
        "| temporal | overall |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for v in vaults if len(vaults) > 1 else ():
        f = fold(scores, cands, v)
        g = f.test_gains
        cells = [f"{g[t]:+.3f}" if t in g else "—" for t in ("lookup", "synthesis", "temporal", "overall")]
        lines.append(f"| {v} | `{f.chosen.name}` | {f.train_margin:+.3f} | {f.test_margin:+.3f} | " +
                     " | ".join(cells) + " |")  # fmt: skip
    chosen, worst = pick(scores, cands, vaults)
    lines += [
        "",
        f"## The choice on all {len(vaults)} vaults: `{chosen.name}`",
        "",
        f"Worst-vault margin {worst:+.3f}. Options: `{json.dumps(dict(chosen.options))}`. Paired against "
        f"`{REFERENCE}` question by question: mean recall gain (wins/losses, exact sign test p, verdict at "
        "p < 0.05 with a 95% bootstrap interval excluding 0; n.s. = not significant).",
        "",
        "| vault | notes / tokens (pick) | notes / tokens (vector@15) | lookup | synthesis | temporal | overall |",
        "|---|---:|---:|---|---|---|---|",
    ]
    for v in vaults:
        ours, ref = scores[v][chosen.name]["budget"], scores[v][REFERENCE]["budget"]
        cells = paired_cells(data[v], chosen.name)
        if len(cells) == 3:  # no temporal tier
            cells.insert(2, "—")
        lines.append(f"| {v} | {ours['notes']:.1f} / {ours['tokens']:,.0f} | {ref['notes']:.1f} / "
                     f"{ref['tokens']:,.0f} | " + " | ".join(cells) + " |")  # fmt: skip
    lines += ["", "## Top candidates by worst-vault margin", "", "| candidate | worst margin | " +
              " | ".join(vaults) + " |", "|---|---:|" + "---:|" * len(vaults)]  # fmt: skip
    ranked = sorted(cands, key=lambda c: -min(margin(scores, v, c.name) for v in vaults))
    for c in ranked[:15]:
        ms = [margin(scores, v, c.name) for v in vaults]
        lines.append(f"| `{c.name}` | {min(ms):+.3f} | " + " | ".join(f"{m:+.3f}" for m in ms) + " |")
    lines += ["", "Overall recall gain of the pick per vault: " +
              ", ".join(f"{v} {tier_gains(scores, v, chosen.name)['overall']:+.3f}" for v in vaults), ""]  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    main()
