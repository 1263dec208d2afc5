"""The evaluation report: one object, rendered as JSON for tools, Markdown for people, and a PNG chart."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eval.errors import EvalError
from eval.golden import Question, Tier
from eval.metrics import Budgets, Run, compare, per_question, summarise, win_matrix
from eval.scoring import AnswerScore, summarise_answers
from eval.stats import paired

HEADLINE = ("vector@5", "vector@10", "vector@15", "graph@5+hop[v15]", "hybrid@15")  # + the default: the bar chart

HOW_TO_READ = (
    "**How to read this.** *Recall* is the fraction of a question's gold notes that a method retrieved, "
    "averaged over the answerable questions of a tier; *all-gold* is the share of questions with every gold "
    "note retrieved; *MRR* is the mean of 1/rank of the first gold note. The *budget* rows give the mean "
    "notes and tokens of context each method handed over per question (unanswerable questions included). "
    "A bigger context winning is not a result: compare methods at similar budgets."
)


@dataclass(frozen=True)
class EvalReport:
    """Everything one evaluation run produced; `pairs` names the (a, b) methods to diff question by question.

    `answers` is optional: `{answer_method: {question_id: AnswerScore}}`.
    """

    golden_path: str
    questions: Sequence[Question]
    run: Run
    budgets: Budgets
    pairs: Sequence[tuple[str, str]] = ()
    config: Mapping[str, Any] = field(default_factory=dict)
    answers: Mapping[str, Mapping[str, AnswerScore]] | None = None
    title: str = "Retrieval evaluation"
    agent: Mapping[str, Any] | None = None  # eval/agent.py `compare`: single-shot vs the agent loop

    def __post_init__(self) -> None:
        for pair in self.pairs:
            unknown = [m for m in pair if m not in self.run]
            if unknown:
                known = ", ".join(self.run)
                raise EvalError(f"pair {list(pair)} names unknown method {unknown[0]!r} (run has: {known})")

    def to_json(self) -> dict[str, Any]:
        rows = per_question(self.questions, self.run)
        data: dict[str, Any] = {
            "golden": self._golden(),
            "config": dict(self.config),
            "methods": summarise(self.questions, self.run, self.budgets),
            "questions": [self._with_answers(row) for row in rows],
            "wins": {
                "pairs": _with_paired(compare(rows, list(self.pairs)), rows),
                "matrix": win_matrix(rows, list(self.run)),
            },
        }
        if self.answers is not None:
            data["answers"] = {m: summarise_answers(s, self.questions) for m, s in self.answers.items()}
        if self.agent is not None:
            data["agent"] = dict(self.agent)
        return data

    def _golden(self) -> dict[str, Any]:
        counts = Counter(q.tier for q in self.questions)
        tiers = {tier.value: counts[tier] for tier in Tier if counts[tier]}
        return {"path": str(self.golden_path), "questions": len(self.questions), "tiers": tiers}

    def _with_answers(self, row: dict[str, Any]) -> dict[str, Any]:
        if self.answers is None:
            return row
        scored = {m: asdict(s[row["id"]]) for m, s in self.answers.items() if row["id"] in s}
        return {**row, "answers": scored}

    def to_markdown(self) -> str:
        return render_markdown(self.to_json(), self.title)

    def save(self, out_dir: str | Path, stem: str) -> list[Path]:
        """Write `<stem>.md`, `<stem>.json` and `<stem>.png` under out_dir; same input, same bytes."""
        out = check_out_dir(Path(out_dir))
        out.mkdir(parents=True, exist_ok=True)
        data = self.to_json()
        md, js, png, frontier = (out / f"{stem}{ext}" for ext in (".md", ".json", ".png", "-frontier.png"))
        md.write_text(render_markdown(data, self.title), encoding="utf-8", newline="\n")
        text = json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"
        js.write_text(text, encoding="utf-8", newline="\n")
        default = data["config"].get("default_method")
        core = _core(data)["methods"]
        headline = {m: v for m, v in core.items() if m in HEADLINE or m == default} or core
        _plot(headline, png, self.title)  # every method is in the tables and on the frontier chart
        _plot_frontier(core, frontier, self.title, default)
        return [md, js, png, frontier]


def check_out_dir(out: Path) -> Path:
    """``out`` when reports can be written there: a folder, or a path where one can be made."""
    if out.exists() and not out.is_dir():
        raise EvalError(f"{out} is a file, not a folder: give --out a folder for the reports")
    return out


def _plot(methods: Mapping[str, Any], path: Path, title: str) -> None:
    try:
        from eval.chart import plot_recall
    except ImportError as e:
        hint = "install it with: pip install 'vault2okf[eval]'"
        raise EvalError(f"the chart needs matplotlib ({e}); {hint}") from e
    plot_recall(methods, path, title=f"{title}: recall by tier")


def _plot_frontier(methods: Mapping[str, Any], path: Path, title: str, default: str | None) -> None:
    from eval.chart import plot_frontier  # matplotlib is checked by _plot first

    plot_frontier(methods, path, default=default, title=f"{title}: recall against context tokens (dashed: frontier)")


def _with_paired(pairs: list[dict[str, Any]], rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each (a, b) pair with a paired test of a against b per tier and overall (eval/stats.py)."""
    tiers = [t.value for t in Tier if t is not Tier.UNANSWERABLE and any(r["tier"] == t.value for r in rows)]
    out = []
    for pair in pairs:
        a, b = pair["a"], pair["b"]
        tests = {}
        for tier in [*tiers, "overall"]:
            chosen = [r for r in rows if tier == "overall" or r["tier"] == tier]
            tests[tier] = paired([r["recall"][a] for r in chosen], [r["recall"][b] for r in chosen]).to_json()
        out.append({**pair, "paired": tests})
    return out


def render_markdown(data: Mapping[str, Any], title: str) -> str:
    """Markdown for people from `EvalReport.to_json()` output.

    Methods named ``name:variant`` (e.g. one per neighbour ranker) get one row each in a table of their own,
    so the tier x method tables stay readable; the JSON holds everything for every method.
    """
    core = _core(data)
    sections = [f"# {title}", HOW_TO_READ, _setup(data), _recall_table(core), _variants_table(data)]
    sections += [_hit_mrr_table(core), _question_table(core), _wins_section(core)]
    if "answers" in data:
        sections.append(_answers_table(data["answers"]))
    if "agent" in data:
        sections.append(_agent_section(data["agent"]))
    return "\n\n".join(s for s in sections if s) + "\n"


def _core(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` restricted to the methods without a ``:variant`` suffix."""
    keep = [m for m in data["methods"] if ":" not in m]
    matrix = {a: {b: n for b, n in row.items() if b in keep} for a, row in data["wins"]["matrix"].items() if a in keep}
    return {
        **data,
        "methods": {m: data["methods"][m] for m in keep},
        "wins": {**data["wins"], "matrix": matrix},
    }


def _variants_table(data: Mapping[str, Any]) -> str:
    variants = {m: v for m, v in data["methods"].items() if ":" in m}
    if not variants:
        return ""
    tiers = [t.value for t in Tier if t.value in next(iter(variants.values()))["tiers"]]
    rows = [
        [name, *(_num(v["tiers"][t]["recall"]) for t in tiers), _num(v["overall"]["recall"]),
         f"{v['budget']['notes']:.1f}", f"{v['budget']['tokens']:,.0f}"]
        for name, v in variants.items()
    ]  # fmt: skip
    header = ["Method:variant", *tiers, "overall", "notes", "tokens"]
    return "## Variants (recall by tier, one row per method)\n\n" + _table(header, rows)


def _setup(data: Mapping[str, Any]) -> str:
    golden = data["golden"]
    tiers = ", ".join(f"{tier} {n}" for tier, n in golden["tiers"].items())
    lines = ["## Setup", "", f"- Golden set: `{golden['path']}` ({golden['questions']} questions: {tiers})"]
    tables = []
    for key, value in data["config"].items():
        if isinstance(value, Mapping) and value and all(isinstance(v, Mapping) for v in value.values()):
            tables.append(f"{key}:\n\n" + _mapping_table(value))
            continue
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        lines.append(f"- {key}: {shown}")
    return "\n\n".join(["\n".join(lines), *tables])


def _mapping_table(value: Mapping[str, Mapping[str, Any]]) -> str:
    """``{row: {column: cell}}`` as a table."""
    columns = list(dict.fromkeys(c for row in value.values() for c in row))
    rows = [[name, *(_cell(row.get(c)) for c in columns)] for name, row in value.items()]
    return _table(["", *columns], rows)


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = [_row(header), _row(["---"] * len(header))]
    return "\n".join(lines + [_row(r) for r in rows])


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _tier_rows(data: Mapping[str, Any]) -> list[tuple[str, str, list[Mapping[str, Any]]]]:
    """(label, n, per-method scores) for each tier present, then overall."""
    methods = list(data["methods"].values())
    tiers = [t.value for t in Tier if methods and t.value in methods[0]["tiers"]]
    rows = [(t, str(methods[0]["tiers"][t]["n"]), [m["tiers"][t] for m in methods]) for t in tiers]
    overall_n = str(methods[0]["overall"]["n"]) if methods else "0"
    return rows + [("**overall**", overall_n, [m["overall"] for m in methods])]


def _recall_table(data: Mapping[str, Any]) -> str:
    methods = data["methods"]
    rows = [[label, n, *(_num(s["recall"]) for s in scores)] for label, n, scores in _tier_rows(data)]
    rows.append(["budget: notes (mean)", "", *(f"{m['budget']['notes']:.1f}" for m in methods.values())])
    rows.append(["budget: tokens (mean)", "", *(f"{m['budget']['tokens']:,.0f}" for m in methods.values())])
    default = data["config"].get("default_method")
    header = [f"**{m}** (default)" if m == default else m for m in methods]
    return "## Recall by tier\n\n" + _table(["Tier", "n", *header], rows)


def _hit_mrr_table(data: Mapping[str, Any]) -> str:
    rows = [
        [label, n, *(f"{_num(s['hit_all'])} / {_num(s['mrr'])}" for s in scores)]
        for label, n, scores in _tier_rows(data)
    ]
    header = ["Tier", "n", *data["methods"]]
    return "## All-gold hit rate / MRR\n\n" + _table(header, rows)


def _question_table(data: Mapping[str, Any]) -> str:
    methods = list(data["methods"])
    rows = [[q["id"], q["tier"], *(_found_cell(q, m) for m in methods)] for q in data["questions"]]
    intro = "Gold notes found / gold notes, per question (— for unanswerable questions)."
    return f"## Per question\n\n{intro}\n\n" + _table(["id", "tier", *methods], rows)


def _found_cell(question: Mapping[str, Any], method: str) -> str:
    gold = question["gold"]
    return f"{len(question['found'][method])}/{len(gold)}" if gold else "—"


def _wins_section(data: Mapping[str, Any]) -> str:
    parts = ["## Wins and losses", "Questions where one method's recall is strictly higher than the other's."]
    parts += [_pair_text(pair) for pair in data["wins"]["pairs"]] or ["No method pairs were configured."]
    parts.append(_matrix_table(data["wins"]["matrix"]))
    return "\n\n".join(parts)


def _pair_text(pair: Mapping[str, Any]) -> str:
    a, b = pair["a"], pair["b"]
    return "\n".join(
        [
            f"### {a} vs {b}",
            "",
            f"- {a} wins ({len(pair['wins'])}): {_ids(pair['wins'])}",
            f"- {a} loses ({len(pair['losses'])}): {_ids(pair['losses'])}",
            f"- ties: {pair['ties']}",
            *(_paired_line(tier, test) for tier, test in pair.get("paired", {}).items()),
        ]
    )


def _paired_line(tier: str, test: Mapping[str, Any]) -> str:
    verdict = test["verdict"] if test["verdict"] == "not significant" else f"{test['verdict']}, significant"
    return (
        f"- {tier}: mean recall gain {test['mean_diff']:+.3f}, 95% interval [{test['ci_low']:+.3f}, "
        f"{test['ci_high']:+.3f}], sign test p = {test['p_sign']:.3f} ({test['wins']} won, {test['losses']} lost): "
        f"**{verdict}**"
    )


def _ids(ids: Sequence[str]) -> str:
    return ", ".join(f"`{i}`" for i in ids) if ids else "none"


def _matrix_table(matrix: Mapping[str, Mapping[str, int]]) -> str:
    methods = list(matrix)
    rows = [[a, *("—" if a == b else str(matrix[a][b]) for b in methods)] for a in methods]
    intro = "Questions won, row method over column method:"
    return f"{intro}\n\n" + _table(["row beats column", *methods], rows)


def _answers_table(answers: Mapping[str, Mapping[str, Any]]) -> str:
    header = ["Method", "Tier", "n", "entity recall", "precision", "exact", "not found", "wrong", "refusal"]
    rows = []
    for method, summary in answers.items():
        groups = [*summary["tiers"].items(), ("**overall**", summary["overall"])]
        rows += [[method, tier, str(r["n"]), *_answer_cells(r)] for tier, r in groups]
    intro = (
        "Deterministic scoring against each question's answer entities. *not found* answers are honest "
        "misses; *wrong* answers claim something without naming any gold entity; *refusal* is the share of "
        "unanswerable questions answered with 'not found'."
    )
    return f"## Answers\n\n{intro}\n\n" + _table(header, rows) + _grounding_table(answers)


def _grounding_table(answers: Mapping[str, Mapping[str, Any]]) -> str:
    """Citations and leaks over every question (structured answers; absent from older reports)."""
    rows = []
    for method, summary in answers.items():
        r = summary.get("all", {})
        if r.get("claims") is None:
            continue
        rows.append([method, str(r["n"]), str(r["claims"]), _num(r["cited"]), _num(r["cites_gold"]),
                     str(r["leaked"]), f"{r['refused']} of {r['unanswerable']}"])  # fmt: skip
    if not rows:
        return ""
    header = ["Method", "n", "claims", "claims citing a context note", "claims citing a gold note",
              "answers with leaked template", "unanswerable refused"]  # fmt: skip
    intro = (
        "Every question. A *claim* is an answer that is not 'not found'; it cites a context note when at least "
        "one of its citations names a note it was given, a gold note when one names a gold note of the question; "
        "*leaked template* counts answers holding any of the prompt's own structure (turn markers, note tags, "
        "`Question:` lines)."
    )
    return f"\n\n### Grounding\n\n{intro}\n\n" + _table(header, rows) + _support_table(answers)


def _support_table(answers: Mapping[str, Mapping[str, Any]]) -> str:
    """Per tier, how the quotes' support marks (strong or weak, `--llm extract`) meet the gold notes; absent when no
    answer carries marks."""
    rows = []
    for method, summary in answers.items():
        if not summary.get("all", {}).get("marked"):
            continue
        for tier, r in [*summary["tiers"].items(), ("**all**", summary["all"])]:
            answerable = r["n"] - r["unanswerable"]
            wrong = f"{r['answered_strong']} of {r['unanswerable']}"
            rows.append([method, tier, str(answerable), _share(r["strong_gold"], answerable),
                         _share(r["marked_gold"], answerable), wrong])  # fmt: skip
    if not rows:
        return ""
    header = ["Method", "Tier", "answerable", "a strong quote cites a gold note", "a strong or weak quote cites a "
              "gold note", "unanswerable answered strong"]  # fmt: skip
    intro = (
        "Answers whose quotes are marked strong (the passage covers the question and holds what it asks for) or "
        "weak. Of the answerable questions, those a strong quote answers from a gold note, and those any quote "
        "does; of the unanswerable ones, those answered with strong support (the error that matters)."
    )
    return f"\n\n### Support\n\n{intro}\n\n" + _table(header, rows)


def _share(count: int, total: int) -> str:
    return f"{count} of {total}" + (f" ({count / total:.0%})" if total else "")


def _answer_cells(rates: Mapping[str, Any]) -> list[str]:
    keys = ("entity_recall", "precision", "exact", "not_found", "wrong", "refusal")
    return [_num(rates[k]) for k in keys]


def _agent_section(agent: Mapping[str, Any]) -> str:
    """Single-shot against the agent loop, per tier: notes read, answer scores, tool calls, tokens, wall time."""
    c = agent["config"]
    header = ["Tier", "n", "notes read: single / agent", "entity recall", "exact", "not found", "refusal",
              "tool calls (agent)", "tokens: single / agent", "wall s: single / agent"]  # fmt: skip
    groups = [*agent["tiers"].items(), ("**overall**", agent["overall"]), ("all", agent["all"])]
    rows = []
    for tier, g in groups:
        s, a = g["single"], g["agent"]
        pair = [f"{_num(s[k])} / {_num(a[k])}" for k in ("notes_recall", "entity_recall", "exact", "not_found",
                                                         "refusal")]  # fmt: skip
        tokens = f"{s['tokens']:,.0f} / {a['tokens']:,.0f} ({_ratio(g['tokens_ratio'])})"
        wall = f"{s['seconds']:.1f} / {a['seconds']:.1f} ({_ratio(g['seconds_ratio'])})"
        rows.append([tier, str(g["n"]), *pair, f"{a['tool_calls']:.1f}", tokens, wall])
    stops = Counter(q["agent"].get("stop") for q in agent["questions"])
    calls = Counter(call["tool"] for q in agent["questions"] for call in q["agent"].get("calls", []))
    intro = (
        f"Single-shot (`{c['single_shot']}`) against the agent loop ({c['agent']}, same model, "
        f"{c['answer_tokens']} tokens per model call) on the same questions. *Notes read* is the recall of "
        "the gold notes among the notes the answer could rest on: the retrieved context, or every note the "
        "agent's tool results showed. *Tokens* are prompt + completion over every model call; *wall s* is "
        "retrieval + generation for single-shot, the whole loop for the agent; in brackets: agent / single. "
        "*overall* is the answerable questions, *all* every question."
    )
    lines = [f"- agent stops: {', '.join(f'{k} {v}' for k, v in sorted(stops.items(), key=str))}",
             f"- tools called: {', '.join(f'{k} {v}' for k, v in calls.most_common()) or 'none'}"]  # fmt: skip
    return f"## Single-shot vs agent\n\n{intro}\n\n" + _table(header, rows) + "\n\n" + "\n".join(lines)


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}x"
