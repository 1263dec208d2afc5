"""Choose `--llm extract`'s refusal setting blind: leave one vault out on the golden sets.

    python scripts/select_extract.py --bundles /tmp/x27 [--reuse] [--vaults a,b]

BUNDLES/<vault>/bundle is each shared vault converted and indexed with the offline MiniLM (`vault2okf convert`,
`vault2okf index --embedder minilm`). For every question of golden/<vault>.jsonl the default search builds the
context and `retriever.answer.extract` scores its passages once per rank weight; the scored passages are cached
in BUNDLES/extract-<vault>.json with the search and answer times (`--reuse` reads them instead of searching
again). Then, for each held-out vault, the setting (support measure, typed quantity check, one quote per note or
not, rank weight, threshold)
is picked on the other vaults and applied to the held-out one, under two objectives: `balanced` (the default's:
answerable questions whose citations include a gold note, as a share, plus unanswerable questions refused, as a
share) and `questions` (each question once). A tie goes to the first setting of the grid (lower threshold,
untyped, lower weight). The same pick on all vaults gives the default. Writes reports/extract-threshold.md and
.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval.golden import load_golden  # noqa: E402
from retriever.answer.contract import Answer, ContextNote  # noqa: E402
from retriever.answer.extract import ExtractAnswerer, Support, choose, wants_quantity  # noqa: E402
from retriever.answer.passages import terms  # noqa: E402
from retriever.answer.prompt import context_notes  # noqa: E402
from retriever.retrieve import DEFAULT_SPEC, Retriever  # noqa: E402

VAULTS = ("blades-of-vengeance", "children-of-ash", "daggerheart", "de-wiki", "nova-regna", "tasks-docs", "thellade")
WEIGHTS = (0.0, 0.1, 0.2, 0.4)
THRESHOLDS = {
    "share": tuple(round(i * 0.01, 2) for i in range(101)),
    "raw": tuple(round(i * 0.2, 1) for i in range(101)),
}
KEEP = 40  # passages kept per question and weight: `choose` takes three, skipping repeated texts
REPORT = ROOT / "reports" / "extract-threshold"
T = TypeVar("T")


@dataclass(frozen=True)
class Row:
    """One question: its tier, gold note ids, and per rank weight its best passages."""

    id: str
    tier: str
    gold: frozenset[str]
    quantity: bool  # a quantity question (`extract.wants_quantity`)
    ranked: dict[str, list[Kept]]

    @property
    def answerable(self) -> bool:
        return self.tier != "unanswerable"


def collect(bundle: Path, golden: Path) -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
    """Per question the best passages for every weight, and the times (ms) of the search and of a whole answer with
    the answerer's defaults, by wall clock and by this process's CPU clock."""
    retriever = Retriever.open(bundle)
    retriever.prepare(DEFAULT_SPEC)
    retriever.embed("warm up")  # as `chat` does: the first question pays no one-time set-up
    rows: list[dict[str, Any]] = []
    times: dict[str, list[float]] = {k: [] for k in ("search", "answer", "search_cpu", "answer_cpu", "citations",
                                                     "outside")}  # fmt: skip
    answerer = ExtractAnswerer()  # one answerer for every question, as in `chat`
    for q in load_golden(golden):
        retrieval = _timed(times, "search", partial(retriever.search, q.question, DEFAULT_SPEC))
        notes = context_notes(retrieval)
        answers = [_timed(times, "answer", partial(answerer.answer, q.question, notes)),
                   ExtractAnswerer(threshold=0).answer(q.question, notes)]  # fmt: skip
        times["citations"].append(len([c for a in answers for c in a.citations]))
        times["outside"].append(len(outside(answers, notes)))
        ranked = {}
        for weight in WEIGHTS:
            scored = ExtractAnswerer(threshold=0.0, rank_weight=weight, typed=False).rank(q.question, notes)
            numbered = set([i for i, s in enumerate(scored) if s.quantity][:KEEP])
            kept = [s for i, s in enumerate(scored) if i < KEEP or s.quantity and i in numbered]
            ranked[str(weight)] = [(s.passage.note.note_id, s.text, s.bm25, s.score, s.quantity, s.raw) for s in kept]
        gold = sorted(p.removesuffix(".md") for p in q.gold)  # the scorer's rule (eval/scoring.py)
        rows.append({"id": q.id, "tier": q.tier.value, "gold": gold, "quantity": wants_quantity(q.question),
                     "ranked": ranked})  # fmt: skip
    return rows, times


def outside(answers: Sequence[Answer], notes: Sequence[ContextNote]) -> list[str]:
    """Citations (and quotes) that do not point into the context: a note not in it, or a quote not in its text."""
    texts = {n.note_id: n.text for n in notes}
    bad = [c.ref for a in answers for c in a.citations if c.note_id not in texts]
    for a in answers:
        for quote in json.loads(a.raw)["quotes"]:
            note_id = quote["ref"].partition("#")[0]
            if quote["text"] not in texts.get(note_id, ""):
                bad.append(quote["ref"])
    return bad


def _timed(times: dict[str, list[float]], name: str, run: Callable[[], T]) -> T:
    wall, cpu = time.perf_counter(), time.process_time()
    result = run()
    times[name].append((time.perf_counter() - wall) * 1000)
    times[name + "_cpu"].append((time.process_time() - cpu) * 1000)
    return result


@dataclass(frozen=True)
class Kept:
    """A cached scored passage: what `extract.choose` reads, and the note it is in."""

    note_id: str
    text: str
    bm25: float
    score: float
    quantity: bool
    raw: float


@dataclass(frozen=True)
class Setting:
    weight: float
    typed: bool
    support: str  # `extract.Support`: share or raw
    threshold: float
    per_note: bool = False  # one quote per note (`extract.choose`)


def cited(row: Row, setting: Setting) -> set[str] | None:
    """The notes the answerer would cite (`extract.choose` itself, after the typed filter); None: it refuses."""
    ranked = row.ranked[str(setting.weight)]
    if setting.typed and row.quantity:
        ranked = [k for k in ranked if k.quantity]
    chosen = choose(ranked, setting.threshold, Support(setting.support), per_note=setting.per_note)
    return {k.note_id for k in chosen} if chosen else None


def rates(rows: Sequence[Row], setting: Setting) -> dict[str, Any]:
    """Answerable citing gold, answerable refused, unanswerable refused (counts and rates) for one setting."""
    answerable = [r for r in rows if r.answerable]
    unanswerable = [r for r in rows if not r.answerable]
    outcome = {r.id: cited(r, setting) for r in rows}
    gold = sum(1 for r in answerable if (outcome[r.id] or set()) & r.gold)
    wrongly = sum(1 for r in answerable if outcome[r.id] is None)
    refused = sum(1 for r in unanswerable if outcome[r.id] is None)
    return {
        "answerable": len(answerable), "cites_gold": gold, "cites_gold_rate": gold / max(1, len(answerable)),
        "refused_answerable": wrongly, "unanswerable": len(unanswerable), "refused": refused,
        "refusal_rate": refused / max(1, len(unanswerable)),
    }  # fmt: skip


def balanced(r: dict[str, Any]) -> float:
    """The brief's objective for one vault: answerable cites-gold rate + unanswerable refusal rate."""
    return float(r["cites_gold_rate"] + r["refusal_rate"])


def questions(r: dict[str, Any]) -> float:
    """Each question once: the share handled right (an answerable one cites gold, an unanswerable one is refused)."""
    return float((r["cites_gold"] + r["refused"]) / max(1, r["answerable"] + r["unanswerable"]))


OBJECTIVES: dict[str, Callable[[dict[str, Any]], float]] = {"balanced": balanced, "questions": questions}
DEFAULT_OBJECTIVE = "balanced"


def settings() -> list[Setting]:
    """The grid, in tie-break order: lower threshold first, then untyped, then lower weight, then several quotes of
    one note before one quote per note."""
    return [Setting(w, typed, support, t, per_note) for support in ("share", "raw") for t in THRESHOLDS[support]
            for typed in (False, True) for w in WEIGHTS for per_note in (False, True)]  # fmt: skip


def pick(
    sets: dict[str, list[Row]], names: Sequence[str], goal: str, grid: Sequence[Setting] | None = None
) -> tuple[Setting, float]:
    """The setting of `grid` (all of them by default) maximising the mean over the vaults `names` of the objective
    `goal`; the first of a tie."""
    grid = settings() if grid is None else grid
    best, value = grid[0], -1.0
    for setting in grid:
        got = sum(OBJECTIVES[goal](rates(sets[n], setting)) for n in names) / len(names)
        if got > value + 1e-12:
            best, value = setting, got
    return best, value


def load_rows(data: list[dict[str, Any]]) -> list[Row]:
    return [Row(d["id"], d["tier"], frozenset(d["gold"]), d["quantity"],
                {w: [Kept(*x) for x in v] for w, v in d["ranked"].items()}) for d in data]  # fmt: skip


def question_words(golden: Path, names: Sequence[str]) -> tuple[float, float]:
    """Mean scoring terms per question (`extract.terms`, distinct): answerable, unanswerable, over `names`."""
    counts: dict[bool, list[int]] = {True: [], False: []}
    for name in names:
        for q in load_golden(golden / f"{name}.jsonl"):
            counts[q.answerable].append(len(set(terms(q.question))))
    return sum(counts[True]) / len(counts[True]), sum(counts[False]) / max(1, len(counts[False]))


def report(
    sets: dict[str, list[Row]], times: dict[str, dict[str, list[float]]], golden: Path
) -> tuple[str, dict[str, Any]]:
    names = list(sets)
    lines = ["# `--llm extract`: the refusal threshold, chosen leaving one vault out", "",
             "Generated by `scripts/select_extract.py` (do not edit). Context: the default search (`DEFAULT_SPEC`) "
             "over each bundle indexed with the offline MiniLM. Grid: support measure (share: BM25 over the "
             "question's total IDF, thresholds 0 to 1 by 0.01; raw: BM25, 0 to 20 by 0.2), typed quantity check "
             "on/off, one quote per note on/off, rank weight in " + ", ".join(map(str, WEIGHTS)) + ". Objectives, "
             "averaged over the training "
             "vaults: `questions` = share of questions handled right (answerable: its citations include a gold note; "
             "unanswerable: refused), each question once; `balanced` = answerable citing-gold rate + unanswerable "
             f"refusal rate. The default comes from `{DEFAULT_OBJECTIVE}`.", ""]  # fmt: skip
    data: dict[str, Any] = {"folds": {}, "default": {}}
    for goal in OBJECTIVES:
        lines += [f"## Held out, objective `{goal}`", "",
                  "| held-out vault | chosen on | support | typed | per note | rank weight | threshold "
                  "| answerable citing gold | answerable refused | unanswerable refused |",
                  "|---|---|---|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
        folds = []
        for held in names:
            train = [n for n in names if n != held]
            setting, value = pick(sets, train, goal)
            r = rates(sets[held], setting)
            folds.append({"held_out": held, "train": train, **asdict(setting), "train_objective": round(value, 4), **r})
            lines.append(f"| {held} | {', '.join(train)} | {_setting(setting)} | {r['cites_gold']}/{r['answerable']}"
                         f" ({r['cites_gold_rate']:.0%}) | {r['refused_answerable']}/{r['answerable']} "
                         f"| {r['refused']}/{r['unanswerable']} |")  # fmt: skip
        total = {k: sum(f[k] for f in folds) for k in ("cites_gold", "answerable", "refused_answerable", "refused",
                                                      "unanswerable")}  # fmt: skip
        lines += [f"| **all, held out** | | | | | | | {total['cites_gold']}/{total['answerable']} "
                  f"({total['cites_gold'] / total['answerable']:.0%}) | {total['refused_answerable']}/"
                  f"{total['answerable']} | {total['refused']}/{total['unanswerable']} |", ""]  # fmt: skip
        data["folds"][goal] = folds
        several = [s for s in settings() if not s.per_note]  # the same folds without the per-note choice
        base = [rates(sets[h], pick(sets, [n for n in names if n != h], goal, several)[0]) for h in names]
        base_total = {k: sum(b[k] for b in base) for k in total}
        data["folds_several_quotes_per_note"] = {**data.get("folds_several_quotes_per_note", {}), goal: base_total}
        lines += [f"The same folds with one quote per note left out of the grid (the rule before it): answerable "
                  f"citing gold {base_total['cites_gold']}/{base_total['answerable']} "
                  f"({base_total['cites_gold'] / base_total['answerable']:.0%}), answerable refused "
                  f"{base_total['refused_answerable']}, unanswerable refused {base_total['refused']}/"
                  f"{base_total['unanswerable']}.", ""]  # fmt: skip
        setting, value = pick(sets, names, goal)
        data["default"][goal] = {**asdict(setting), "objective": round(value, 4),
                                 "vaults": {n: rates(sets[n], setting) for n in names}}  # fmt: skip
        lines += [f"Chosen on all of them with `{goal}`: {_setting(setting, ', ')} (objective {value:.3f}).", ""]
    answerable, unanswerable = question_words(golden, names)
    lines += ["Raw BM25 grows with the number of question words, and the sets' questions differ in length by tier: "
              f"{answerable:.1f} scoring words per answerable question, {unanswerable:.1f} per unanswerable one, so "
              "a raw threshold partly refuses short questions, whatever they ask.", ""]  # fmt: skip
    chosen = data["default"][DEFAULT_OBJECTIVE]
    setting = Setting(**{k: chosen[k] for k in ("weight", "typed", "support", "threshold", "per_note")})
    lines += [f"## The default (objective `{DEFAULT_OBJECTIVE}`, all vaults), in sample", "",
              "| vault | answerable citing gold | answerable refused | unanswerable refused "
              "| threshold 0: citing gold |",
              "|---|---:|---:|---:|---:|"]  # fmt: skip
    for name in names:
        zero = Setting(setting.weight, setting.typed, "share", 0.0, setting.per_note)
        r, never = rates(sets[name], setting), rates(sets[name], zero)
        lines.append(f"| {name} | {r['cites_gold']}/{r['answerable']} ({r['cites_gold_rate']:.0%}) | "
                     f"{r['refused_answerable']}/{r['answerable']} | {r['refused']}/{r['unanswerable']} | "
                     f"{never['cites_gold']}/{never['answerable']} |")  # fmt: skip
    lines += [
        "",
        "## Answer time",
        "",
        "Milliseconds per question on the machine that ran this script, the search (`DEFAULT_SPEC`, embedder "
        "warm) beside the answer (`ExtractAnswerer()` with its defaults, given the search's context): median "
        "and max, by wall clock and by this process's CPU time (the wall clock counts other processes' load).",
        "",
        "| vault | search wall | answer wall | search CPU | answer CPU |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, t in times.items():
        cells = [f"{_median(t[k]):.1f} / {max(t[k]):.1f}" for k in ("search", "answer", "search_cpu", "answer_cpu")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")  # fmt: skip
    cited, out = (sum(sum(t[k]) for t in times.values()) for k in ("citations", "outside"))
    lines += ["", "## Citations into the context", "",
              f"Every question of every set answered twice (the defaults, and threshold 0 so that every question is "
              f"quoted): {int(cited)} citations, {int(out)} of them (or of their quotes) outside the context the "
              "search built; a quote counts as inside when it is a substring of its note's context text."]  # fmt: skip
    return "\n".join(lines) + "\n", data


def _setting(s: Setting, sep: str = " | ") -> str:
    return sep.join(
        (s.support, "yes" if s.typed else "no", "yes" if s.per_note else "no", str(s.weight), f"{s.threshold:g}")
    )


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundles", type=Path, required=True, help="Folder holding <vault>/bundle, indexed.")
    parser.add_argument("--golden", type=Path, default=ROOT / "golden")
    parser.add_argument("--vaults", default=",".join(VAULTS))
    parser.add_argument("--reuse", action="store_true", help="Read the cached passages instead of searching.")
    args = parser.parse_args()
    sets, times = {}, {}
    for vault in args.vaults.split(","):
        cache = args.bundles / f"extract-{vault}.json"
        if args.reuse and cache.is_file():
            data = json.loads(cache.read_text("utf-8"))
        else:
            rows, ms = collect(args.bundles / vault / "bundle", args.golden / f"{vault}.jsonl")
            data = {"rows": rows, "times_ms": ms}
            cache.write_text(json.dumps(data), "utf-8")
            print(f"{vault}: {len(rows)} questions", flush=True)
        sets[vault] = load_rows(data["rows"])
        times[vault] = data["times_ms"]
    text, data = report(sets, times, args.golden)
    REPORT.with_suffix(".md").write_text(text, "utf-8")
    REPORT.with_suffix(".json").write_text(json.dumps(data, indent=2) + "\n", "utf-8")
    print(text)


if __name__ == "__main__":
    main()
