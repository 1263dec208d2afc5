"""``ask --agent``: the model searches the bundle itself, through the tool layer, then answers.

One loop for every backend. Each step the model either calls one of the tools of ``retriever.agent.tools`` or gives
the final, structured answer (the answer contract, ``retriever.answer.contract``). The loop stops on a final
answer, when the step budget (``steps`` tool calls) is spent, or on a call it has already made (same tool, same
arguments); in the last two cases the model must answer from what it has, and may only answer. With ``prefetch``
the search of the question is run first and put in the conversation as if the model had called ``search`` itself
(seed 002).

Grounding (seed 003) is a rule in the system prompt and enforced: a citation may only name a note that a tool
result of this conversation showed (``ToolResult.notes``); any other is dropped, and an answer left citing
nothing is unsupported, or "not found" by the one rule of ``retriever.answer.refusal``.

The models live with their backends (``retriever.answer.llama.LlamaAgent``, ``retriever.answer.bedrock.BedrockAgent``,
behind ``contract.Driver``): each step the loop hands the driver a ``contract.Step`` (the notes seen, the calls
allowed now, the tools' declarations) and gets a ``contract.Decision`` back.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from retriever.agent.spec import DEFAULT_STEPS, AgentSpec
from retriever.agent.tools import TOOL_SPECS, BundleTools, ToolResult, iter_specs, tool_call_schema
from retriever.answer.contract import Answer, ContextNote, Decision, Driver, Step, grammar_safe, parse
from retriever.answer.refusal import NOT_FOUND

__all__ = ["DEFAULT_STEPS", "AgentResult", "AgentSpec", "Call", "Seen", "Usage", "run_agent", "step", "trace_lines"]
PREFETCH_ID = "prefetch_1"
BUDGET_SPENT = "the step budget of {steps} tool calls is spent: give the final answer now, from what the tools returned"
REPEATED = "you already called {tool} with these arguments: give the final answer now, from what the tools returned"


@dataclass(frozen=True)
class Call:
    """One tool call of the trace: run (``result``), or refused with an error fed back (``refused``)."""

    step: int
    result: ToolResult
    injected: bool = False  # the prefetch: run by the loop, shown to the model as its own call
    refused: str = ""  # "repeat" or "steps" when the call was not run

    def to_json(self) -> dict[str, Any]:
        r = self.result
        out: dict[str, Any] = {"step": self.step, "tool": r.tool, "arguments": r.arguments, "chars": r.chars,
                               "ms": r.ms, "error": r.is_error, "notes": list(r.notes)}  # fmt: skip
        if self.injected:
            out["injected"] = True
        if self.refused:
            out["refused"] = self.refused
        return out


@dataclass
class Usage:
    prompt: int = 0
    completion: int = 0
    model_calls: int = 0

    def add(self, prompt: int, completion: int) -> None:
        self.prompt += prompt
        self.completion += completion
        self.model_calls += 1


class Seen:
    """The notes the tool results have shown so far, in order, as the context a citation may name."""

    def __init__(self, tools: BundleTools) -> None:
        self.tools = tools
        self.ids: dict[str, None] = {}
        self.headings: dict[str, list[str]] = {}
        self._notes: dict[str, ContextNote] = {}

    def add(self, result: ToolResult) -> None:
        if result.is_error:
            return
        for note_id in result.notes:
            self.ids.setdefault(note_id, None)
            self.headings.setdefault(note_id, [])
        for note_id, headings in result.headings.items():
            for heading in headings:
                if note_id in self.headings and heading and heading not in self.headings[note_id]:
                    self.headings[note_id].append(heading)

    def notes(self) -> list[ContextNote]:
        """A ``ContextNote`` (title, doc path, type, session) for every note seen, from the bundle's table."""
        missing = [i for i in self.ids if i not in self._notes]
        if missing:
            rows = self.tools.select(
                "SELECT id, title, doc_path, type, session_number, session_date FROM concepts "
                "WHERE list_contains(?, id)",
                [missing],
            )
            for cid, title, doc_path, kind, number, date in rows:
                session = {"session_number": number, "session_date": str(date) if date else None}
                self._notes[cid] = ContextNote(cid, title, doc_path, "", "tool", 0.0, type=kind or None, **session)
        return [self._notes[i] for i in self.ids if i in self._notes]


def step(seen: Seen, *, final: bool) -> Step:
    """What the model is offered this step: the notes seen, and (unless ``final``) the calls it may make: a tool
    that takes a note id only once ids were shown, and only the ids it was shown."""
    notes = seen.notes()
    headings = {n.note_id: seen.headings.get(n.note_id, []) for n in notes}
    tools = tuple(iter_specs())
    if final:
        return Step(tuple(notes), headings, None, tools)
    ids = [i for i in seen.ids if grammar_safe(i)]
    names = [t for t in TOOL_SPECS if ids or t not in ("read_note", "neighbours")]
    calls = copy.deepcopy(tool_call_schema(names, ids=ids))  # it shares TOOL_SPECS' dicts
    return Step(tuple(notes), headings, calls, tools)


@dataclass(frozen=True)
class AgentResult:
    """One run of the loop: the answer, and the trace (the calls, why it stopped, what it cost)."""

    answer: Answer
    calls: tuple[Call, ...]
    stop: str  # "answer" (the model answered), "steps" (budget spent), "repeat" (a call made twice)
    usage: Usage
    seconds: float
    context: tuple[ContextNote, ...]  # every note a tool result showed, in order (what citations may name)
    vault_paths: Mapping[str, str] = field(default_factory=dict)  # note id -> vault path, for "notes read"

    @property
    def notes_read(self) -> list[str]:
        """Vault paths of the notes the agent opened or retrieved (the union of the results' notes)."""
        return [self.vault_paths[n.note_id] for n in self.context if n.note_id in self.vault_paths]

    @property
    def tool_calls(self) -> int:
        return sum(1 for c in self.calls if not c.refused)

    def trace_json(self) -> dict[str, Any]:
        return {
            "calls": [c.to_json() for c in self.calls],
            "tool_calls": self.tool_calls,
            "stop": self.stop,
            "tokens": {"prompt": self.usage.prompt, "completion": self.usage.completion},
            "model_calls": self.usage.model_calls,
            "wall_ms": round(self.seconds * 1000, 1),
        }


def run_agent(
    question: str,
    tools: BundleTools,
    driver: Driver,
    *,
    steps: int = DEFAULT_STEPS,
    prefetch: bool = False,
    on_call: Callable[[Call], None] | None = None,
) -> AgentResult:
    """Let ``driver``'s model call ``tools`` up to ``steps`` times, then return its grounded answer."""
    start = time.perf_counter()
    seen, usage, calls = Seen(tools), Usage(), []
    made: set[str] = set()
    driver.start(question)

    def record(call: Call) -> None:
        calls.append(call)
        if on_call is not None:
            on_call(call)

    if prefetch:
        arguments = {"query": question[: TOOL_SPECS["search"]["parameters"]["properties"]["query"]["maxLength"]]}
        result = tools.call("search", arguments)
        seen.add(result)
        made.add(_signature("search", arguments))
        driver.inject(PREFETCH_ID, result)
        record(Call(0, result, injected=True))
    stop, runs, number = "", 0, 0
    while True:
        final = bool(stop) or runs >= steps
        if final and not stop:
            stop = "steps"
        decision = driver.decide(step(seen, final=final))
        usage.add(decision.prompt_tokens, decision.completion_tokens)
        if decision.answer is not None or final or not decision.calls:
            stop = stop or "answer"
            break
        number += 1
        outcomes = []
        for call_id, tool, arguments in decision.calls:
            signature = _signature(tool, arguments)
            if signature in made:
                stop = "repeat"
                result, refused = _refusal(tool, arguments, REPEATED.format(tool=tool)), "repeat"
            elif runs >= steps:
                stop = "steps"
                result, refused = _refusal(tool, arguments, BUDGET_SPENT.format(steps=steps)), "steps"
            else:
                result, refused = tools.call(tool, arguments), ""
                runs += 1
                made.add(signature)
                seen.add(result)
            outcomes.append((call_id, result))
            record(Call(number, result, refused=refused))
        driver.feed(outcomes)
    seconds = time.perf_counter() - start
    answer, context = _grounded(decision, seen, (usage.prompt, usage.completion), seconds, driver.model)
    paths = tools.vault_paths(n.note_id for n in context)
    return AgentResult(answer, tuple(calls), stop, usage, seconds, tuple(context), paths)


def _grounded(
    decision: Decision, seen: Seen, tokens: tuple[int, int], seconds: float, model: str
) -> tuple[Answer, list[ContextNote]]:
    """The answer of the final decision and the notes it may cite: citations outside the tool results dropped, an
    exact refusal citing nothing."""
    context = seen.notes()
    headings = {n.note_id: seen.headings.get(n.note_id, []) for n in context}
    reply = decision.answer if decision.answer is not None else decision.raw
    parsed = parse(reply, context, headings)
    if parsed.citations and parsed.text.strip().casefold() == NOT_FOUND:
        parsed = replace(parsed, citations=(), not_found=True)
    return parsed.answer(reply, decision.finish, tokens, seconds, model), context


def _signature(tool: str, arguments: Mapping[str, Any]) -> str:
    return json.dumps([tool, arguments], sort_keys=True, ensure_ascii=False, default=str)


def _refusal(tool: str, arguments: Mapping[str, Any], why: str) -> ToolResult:
    return ToolResult(tool, dict(arguments), f"Error: {why}", True, 0.0)


def trace_lines(result: AgentResult) -> Iterable[str]:
    """The trace for a person: one line per call, then the stop reason and the cost."""
    yield from trace_lines_of(result.calls)
    u = result.usage
    yield (f"  stop: {result.stop}; {result.tool_calls} tool calls, {u.model_calls} model calls, "
           f"{u.prompt} + {u.completion} tokens, {result.seconds:.1f} s")  # fmt: skip


def trace_lines_of(calls: Iterable[Call]) -> Iterable[str]:
    """One line per call: step, tool, arguments, result size and milliseconds, and why it was not run."""
    for call in calls:
        r = call.result
        how = "prefetch" if call.injected else (f"refused: {call.refused}" if call.refused else "")
        flag = " error" if r.is_error and not call.refused else ""
        args = json.dumps(r.arguments, ensure_ascii=False)
        yield f"  [{call.step}] {r.tool} {args} -> {r.chars} chars, {r.ms:.0f} ms{flag}{f' ({how})' if how else ''}"
