"""Choose `--llm extract`'s support marks blind: leave one vault out on the golden sets.

    python scripts/select_support.py --bundles /tmp/support36 [--vaults a,b]

BUNDLES/<vault>/bundle is each shared vault converted and indexed with the offline MiniLM (`vault2okf convert`,
`vault2okf index --embedder minilm`). For every question of its golden set (golden/<vault>.jsonl, or
../shared/golden/<vault>.jsonl) the default search builds the context once; the contexts are cached in
BUNDLES/contexts-<vault>.json and read from there on the next run. Then every setting of the grid (`DEPTHS`: how
many passages sharing a content word a strong one is looked for among; `COVERAGES`: the share of the question's
content words a strong passage covers) answers every question with `ExtractAnswerer` itself, and each answer is
scored: an answerable question is "strong gold" when one of its strong quotes cites a gold note, "any gold" when
one of its quotes does, "not found, gold in context" when it is refused although a gold note is in its context;
an unanswerable question is "answered strong" when one of its quotes is strong (the error that matters).

For each held-out vault the setting that maximises, averaged over the other vaults, `objective` (strong-gold rate
+ any-gold rate + share of unanswerable questions not answered strong) is applied to the held-out one; a tie goes
to the first setting of the grid. The same pick on all vaults gives the default. Writes
reports/extract-support.md and .json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval.golden import load_golden  # noqa: E402
from retriever.answer.contract import Answer, ContextNote  # noqa: E402
from retriever.answer.extract import ExtractAnswerer  # noqa: E402
from retriever.answer.prompt import context_notes  # noqa: E402
from retriever.answer.support import COVERAGE_ANY, Rules, kind_of  # noqa: E402
from retriever.retrieve import DEFAULT_SPEC, Retriever  # noqa: E402

VAULTS = ("blades-of-vengeance", "children-of-ash", "daggerheart", "de-wiki", "nova-regna", "perrins-notes",
          "tasks-docs", "thellade")  # fmt: skip
DEPTHS = (10,)  # 3, 5, 10 and 20 chose 10 on every fold before the rules below (reports/extract-support.md then)
COVERAGES = (0.2, 0.34, 0.5)  # a question asking for a kind (name, number, date, place, reason)
COVERAGES_ANY = (0.25, 0.5)  # a question asking for none
SWITCHES = (False, True)  # names, frame, pair (`support.Rules`)
RULES_ON = ("section", "names", "inherit", "openers", "frame", "pair")  # as labelled
GRID_ON = ("names", "frame", "pair")  # switched in the grid; section and inherit on, openers off throughout
# (when they were in the grid every fold chose section, six of seven inherit, none openers: 1f69b3b's report)
REPORT = ROOT / "reports" / "extract-support"
TOP = 20  # settings listed in the trade-off table


@dataclass(frozen=True)
class Setting:
    depth: int
    coverage: float
    coverage_any: float = COVERAGE_ANY
    section: bool = True
    names: bool = False
    inherit: bool = True
    openers: bool = False
    frame: bool = False
    pair: bool = False

    @property
    def rules(self) -> Rules:
        return Rules(**{k: v for k, v in asdict(self).items() if k != "depth"})

    @property
    def label(self) -> str:
        on = [name for name in RULES_ON if getattr(self, name)]
        return f"{self.depth} | {self.coverage:g} | {self.coverage_any:g} | {', '.join(on) or 'none'}"


class Cached(ExtractAnswerer):
    """`ExtractAnswerer` itself, its passages ranked once per question for every setting of the grid (the rank
    does not depend on the marks' rules)."""

    ranked: dict[str, Any] = {}

    def rank(self, question: str, notes: Sequence[ContextNote]) -> Any:
        key = question + "\0" + "\0".join(n.note_id for n in notes)
        if key not in self.ranked:
            self.ranked[key] = super().rank(question, notes)
        return self.ranked[key]


@dataclass(frozen=True)
class Outcome:
    """One answered question: the notes its strong quotes cite, those all its quotes cite, refused or not."""

    strong: frozenset[str]
    cited: frozenset[str]
    not_found: bool


def golden_path(golden: Path, vault: str) -> Path:
    own = golden / f"{vault}.jsonl"
    return own if own.is_file() else ROOT.parent / "shared" / "golden" / f"{vault}.jsonl"


def collect(bundle: Path, golden: Path) -> list[dict[str, Any]]:
    """Each question with the context notes the default search gives it (as `ContextNote` fields)."""
    retriever = Retriever.open(bundle)
    retriever.prepare(DEFAULT_SPEC)
    rows = []
    for q in load_golden(golden):
        notes = context_notes(retriever.search(q.question, DEFAULT_SPEC))
        rows.append({"id": q.id, "tier": q.tier.value, "question": q.question,
                     "gold": sorted(p.removesuffix(".md") for p in q.gold),
                     "notes": [asdict(n) for n in notes]})  # fmt: skip
    return rows


def load_notes(row: dict[str, Any]) -> list[ContextNote]:
    return [ContextNote(**{**n, "aliases": tuple(n.get("aliases") or ())}) for n in row["notes"]]


def outcome(answer: Answer) -> Outcome:
    strong = frozenset(c.note_id for c in answer.citations if c.support == "strong")
    return Outcome(strong, frozenset(c.note_id for c in answer.citations), answer.not_found)


def rates(rows: Sequence[dict[str, Any]], outcomes: dict[str, Outcome]) -> dict[str, Any]:
    answerable = [r for r in rows if r["tier"] != "unanswerable"]
    unanswerable = [r for r in rows if r["tier"] == "unanswerable"]
    strong = sum(1 for r in answerable if outcomes[r["id"]].strong & set(r["gold"]))
    cited = sum(1 for r in answerable if outcomes[r["id"]].cited & set(r["gold"]))
    in_context = [r for r in answerable if {n["note_id"] for n in r["notes"]} & set(r["gold"])]
    flat = sum(1 for r in in_context if outcomes[r["id"]].not_found)
    wrong = sum(1 for r in unanswerable if outcomes[r["id"]].strong)
    n, u = len(answerable), len(unanswerable)
    return {"answerable": n, "strong_gold": strong, "any_gold": cited, "gold_in_context": len(in_context),
            "not_found_gold_in_context": flat, "unanswerable": u, "answered_strong": wrong,
            "strong_gold_rate": strong / max(1, n), "any_gold_rate": cited / max(1, n),
            "kept_rate": (u - wrong) / max(1, u)}  # fmt: skip


def objective(r: dict[str, Any]) -> float:
    return float(r["strong_gold_rate"] + r["any_gold_rate"] + r["kept_rate"])


def answer_all(
    rows: Sequence[dict[str, Any]], setting: Setting | None, answerer: ExtractAnswerer | None = None
) -> dict[str, Outcome]:
    """Every question answered with `setting` (None: the answerer's defaults, or `answerer`)."""
    if setting is not None:
        answerer = Cached(depth=setting.depth, rules=setting.rules)
    answerer = answerer or Cached()
    return {r["id"]: outcome(answerer.answer(r["question"], load_notes(r))) for r in rows}


def pick(table: dict[Setting, dict[str, dict[str, Any]]], names: Sequence[str]) -> tuple[Setting, float]:
    best, value = next(iter(table)), -1.0
    for setting, per_vault in table.items():
        got = sum(objective(per_vault[n]) for n in names) / len(names)
        if got > value + 1e-12:
            best, value = setting, got
    return best, value


def _cells(r: dict[str, Any]) -> str:
    return (f"{r['strong_gold']}/{r['answerable']} ({r['strong_gold_rate']:.0%}) | {r['any_gold']}/{r['answerable']}"
            f" ({r['any_gold_rate']:.0%}) | {r['not_found_gold_in_context']}/{r['gold_in_context']} | "
            f"{r['answered_strong']}/{r['unanswerable']}")  # fmt: skip


def _total(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    keys = ("answerable", "strong_gold", "any_gold", "gold_in_context", "not_found_gold_in_context", "unanswerable",
            "answered_strong")  # fmt: skip
    t = {k: sum(r[k] for r in results) for k in keys}
    t["strong_gold_rate"] = t["strong_gold"] / max(1, t["answerable"])
    t["any_gold_rate"] = t["any_gold"] / max(1, t["answerable"])
    t["kept_rate"] = 1 - t["answered_strong"] / max(1, t["unanswerable"])
    return t


HEAD = ("| strong quotes cite gold | any quote cites gold | not found, gold in context | unanswerable answered "
        "strong |")  # fmt: skip


def report(
    sets: dict[str, list[dict[str, Any]]],
    table: dict[Setting, dict[str, dict[str, Any]]],
    default: dict[str, dict[str, Any]],
    before: dict[str, dict[str, Any]],
    kinds: dict[str, dict[str, int]],
    ms: dict[str, float],
) -> tuple[str, Any]:
    names = list(sets)
    lines = ["# `--llm extract`: support marks, chosen leaving one vault out", "",
             "Generated by `scripts/select_support.py` (do not edit). Context: the default search (`DEFAULT_SPEC`) "
             "over each bundle indexed with the offline MiniLM; answers: `ExtractAnswerer` itself. Grid: depth "
             f"(strong passages looked for among the first N sharing a content word) in {', '.join(map(str, DEPTHS))}; "
             f"coverage (share of the question's content words a strong passage covers) of a question asking for a "
             f"kind (a name, a number, a date, a place, a reason) in {', '.join(map(str, COVERAGES))}, and of one "
             f"asking for none in {', '.join(map(str, COVERAGES_ANY))}; three rules on or off (`support.Rules`): "
             "*names* (a strong passage names every name the question holds, counting the words coverage counts), "
             "*frame* (the words of a story's course, \"first\", \"next\", \"change\", \"learn\", are no "
             "content words), *pair* (a strong passage covers at least two content words of a part that has two). "
             "On throughout: *section* (coverage counts the words of the passage's whole section) and *inherit* (a "
             "later part of one content word, \"and who runs it?\", is read with the first part's words); off: "
             "*openers* (a word the context only ever writes capitalised is a name where it opens a sentence): when "
             "they were in the grid, every fold chose section, six of seven inherit, none openers. Left out: *note* "
             "(coverage counts the words of the passage's whole note): it makes a passage strong on the words of "
             "another passage of its note (`support` module docstring). Objective, averaged "
             "over the training vaults: strong-gold rate + any-gold rate + share of unanswerable questions not "
             "answered strong.", "",
             "## Each vault held out", "",
             "| held-out vault | depth | coverage | coverage, no kind | rules on " + HEAD,
             "|---|---:|---:|---:|---|---:|---:|---:|---:|"]  # fmt: skip
    folds = []
    for held in names:
        setting, value = pick(table, [n for n in names if n != held])
        r = table[setting][held]
        folds.append({"held_out": held, **asdict(setting), "train_objective": round(value, 4), **r})
        lines.append(f"| {held} | {setting.label} | {_cells(r)} |")
    lines += [f"| **all, held out** | | | | | {_cells(_total(folds))} |", ""]
    setting, value = pick(table, names)
    lines += [f"Chosen on all of them: depth {setting.depth}, coverage {setting.coverage:g}, with no kind "
              f"{setting.coverage_any:g}, rules on: {setting.label.rsplit('| ', 1)[-1]} (objective {value:.3f}).",
              "", "## The answerer's defaults, in sample", "", "| vault " + HEAD,
              "|---|---:|---:|---:|---:|"]  # fmt: skip
    lines += [f"| {n} | {_cells(default[n])} |" for n in names]
    lines += [f"| **all** | {_cells(_total(list(default.values())))} |", "",
              "The same questions with the refusal rule before the marks (`threshold=5.0` on raw BM25, `typed=True`: "
              "a quantity question quotes only passages naming a number); its quotes marked the same way:", "",
              "| vault " + HEAD, "|---|---:|---:|---:|---:|"]  # fmt: skip
    lines += [f"| {n} | {_cells(before[n])} |" for n in names]
    lines += [f"| **all** | {_cells(_total(list(before.values())))} |", "",
              "## Question kinds (`support.kind_of`), all sets", "",
              "| kind | answerable | unanswerable |", "|---|---:|---:|"]  # fmt: skip
    lines += [f"| {k} | {v['answerable']} | {v['unanswerable']} |" for k, v in sorted(kinds.items())]
    lines += ["", f"## The best {TOP} settings of {len(table)}, all vaults together (in sample): the trade-off", "",
              "| depth | coverage | coverage, no kind | rules on " + HEAD + " sets with one answered strong |",
              "|---:|---:|---:|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    ranked = sorted(table.items(), key=lambda item: -sum(objective(item[1][n]) for n in names))
    for s, per in ranked[:TOP]:
        bad = sum(1 for r in per.values() if r["answered_strong"])
        lines.append(f"| {s.label} | {_cells(_total(list(per.values())))} | {bad} of {len(per)} |")
    lines += ["", f"Answering every question of every set once with the defaults took {ms['total']:.0f} ms of CPU "
              f"({ms['per_question']:.1f} ms a question, this process's CPU clock)."]  # fmt: skip
    data = {"folds": folds, "default_setting": asdict(setting), "defaults_in_sample": default, "before": before,
            "grid": [{**asdict(s), **{n: v for n, v in per.items()}} for s, per in table.items()]}  # fmt: skip
    return "\n".join(lines) + "\n", data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundles", type=Path, required=True, help="Folder holding <vault>/bundle, indexed.")
    parser.add_argument("--golden", type=Path, default=ROOT / "golden")
    parser.add_argument("--vaults", default=",".join(VAULTS))
    parser.add_argument("--confirm", default="", help="Vaults scored with the chosen setting only, never chosen on.")
    parser.add_argument("--no-write", action="store_true", help="Print the report, write nothing under reports/.")
    args = parser.parse_args()
    sets, confirm = {}, [v for v in args.confirm.split(",") if v]
    for vault in [*args.vaults.split(","), *confirm]:
        cache = args.bundles / f"contexts-{vault}.json"
        if not cache.is_file():
            cache.write_text(json.dumps(collect(args.bundles / vault / "bundle", golden_path(args.golden, vault))))
            print(f"{vault}: contexts cached", flush=True)
        sets[vault] = json.loads(cache.read_text("utf-8"))
    held = {v: sets.pop(v) for v in confirm}
    table = {}
    grid = [Setting(d, c, a, **dict(zip(GRID_ON, on, strict=True))) for d in DEPTHS for c in COVERAGES
            for a in COVERAGES_ANY for on in itertools.product(SWITCHES, repeat=len(GRID_ON))]  # fmt: skip
    for setting in grid:
        table[setting] = {n: rates(rows, answer_all(rows, setting)) for n, rows in sets.items()}
    cpu = time.process_time()
    default = {n: rates(rows, answer_all(rows, None, ExtractAnswerer())) for n, rows in sets.items()}
    spent = (time.process_time() - cpu) * 1000
    old = ExtractAnswerer(threshold=5.0, typed=True)
    before = {n: rates(rows, answer_all(rows, None, old)) for n, rows in sets.items()}
    count = sum(len(rows) for rows in sets.values())
    kinds: dict[str, dict[str, int]] = {}
    for rows in sets.values():
        for r in rows:
            kind = str(kind_of(r["question"])[0])
            side = "unanswerable" if r["tier"] == "unanswerable" else "answerable"
            kinds.setdefault(kind, {"answerable": 0, "unanswerable": 0})[side] += 1
    text, data = report(sets, table, default, before, kinds, {"total": spent, "per_question": spent / max(1, count)})
    if held:
        setting = Setting(**data["default_setting"])
        lines = ["", "## Confirmed on sets no choice saw", "",
                 f"Scored with the pick on all of the sets above ({setting.label.replace(' |', ',')}), beside the "
                 "refusal rule before:", "",
                 "| vault | rule " + HEAD, "|---|---|---:|---:|---:|---:|"]  # fmt: skip
        old = ExtractAnswerer(threshold=5.0, typed=True)
        for name, rows in held.items():
            chosen, before_rows = rates(rows, answer_all(rows, setting)), rates(rows, answer_all(rows, None, old))
            lines += [f"| {name} | marks | {_cells(chosen)} |", f"| {name} | before | {_cells(before_rows)} |"]
            data.setdefault("confirmed", {})[name] = {"marks": chosen, "before": before_rows}
        text += "\n".join(lines) + "\n"
    if not args.no_write:
        REPORT.with_suffix(".md").write_text(text, "utf-8")
        REPORT.with_suffix(".json").write_text(json.dumps(data, indent=2) + "\n", "utf-8")
    print(text)


if __name__ == "__main__":
    main()
