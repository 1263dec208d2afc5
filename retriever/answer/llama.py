"""Answer backend: a local Gemma GGUF through llama-cpp-python (CPU, or Vulkan with `n_gpu_layers`).

The reply is generated under a grammar (`contract.gbnf`): one JSON object whose citations can only name
notes of the context. The model is loaded once, on the first answer, with a context sized to that prompt
(never more than `n_ctx`); a later, longer prompt grows it. One answerer serves any number of questions.

The module holds the backend whole: its options (`LlamaOptions`), the model (`LlamaModel`), the single-shot
answerer (`LlamaAnswerer`) and the agent loop's driver (`LlamaAgent`): the conversation as a text transcript, one
JSON object per step under a grammar made from the step's JSON Schema (the calls it may make, with ids it has
been shown, plus the answer), so even the 270M Gemma emits well-formed calls and answers.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retriever.answer.agent_prompt import ANSWER_TOOL, SYSTEM_PROMPT, call_text, quoted
from retriever.answer.contract import Decision, OnToken, Step, ToolOutput, gbnf, json_schema, load_json, parse
from retriever.answer.prompt import DEFAULT_PER_NOTE_TOKENS, build_messages, fit_context, neutralise, note_headings
from retriever.answer.records import ANSWER_TOKENS, Answer, AnswerError, ContextNote
from retriever.answer.structured import AnswerStream
from retriever.tokens import count_tokens

log = logging.getLogger(__name__)

ENV_MODEL = "VAULT2OKF_GGUF"
ENV_THREADS = "VAULT2OKF_LLAMA_THREADS"  # overrides the free-core count
END_OF_TURN = "<end_of_turn>"
BIGGER_MODEL_HINT = f"point at a bigger Gemma GGUF with --model /path/gemma-3-4b-it-Q4_K_M.gguf (or set {ENV_MODEL})"
TINY_MODEL_NOTICE = (
    "using the packaged Gemma 3 270M GGUF: a tiny base model, fine for checking the pipeline but not for "
    f"good answers — {BIGGER_MODEL_HINT}; --llm extract gives grounded quotes faster, with no model"
)
REPLY_CUE = "JSON reply:\n"
REPEAT_PENALTY = 1.15
CTX_STEP = 512  # context sizes are rounded up to this
# Most tokens of note text the local model reads (0: the whole retrieval). Chosen on children-of-ash and
# nova-regna, confirmed on de-wiki and tasks-docs: no smaller budget answered better or refused more with the
# packaged 270M (reports/llama-context-budget.md).
DEFAULT_CONTEXT_TOKENS = 0
_LOOP_PERIODS = range(1, 33)  # a reply whose last 3 x p tokens repeat with period p is looping
QUERY_CHARS = 120  # the agent's search query: longer ones are where a small model starts to loop


@dataclass(frozen=True)
class LlamaOptions:
    """``--llm llama``: the GGUF (None: $VAULT2OKF_GGUF, else the packaged 270M) and how llama.cpp runs it."""

    model: str | None = None
    gpu_layers: int = 0  # layers offloaded (a GPU build, e.g. Vulkan; -1: all)
    n_ctx: int = 8192  # the largest context window the answerer allocates
    context_tokens: int | None = None  # most tokens of note text the model reads (None: DEFAULT_CONTEXT_TOKENS)
    answer_tokens: int = ANSWER_TOKENS

    def check(self) -> None:
        resolve_model_path(self.model)

    def _model_options(self) -> dict[str, Any]:
        from retriever.embed import verbose  # `vault2okf --verbose`: llama.cpp's log lines too

        return {"n_gpu_layers": self.gpu_layers, "n_ctx": self.n_ctx, "answer_tokens": self.answer_tokens,
                "verbose": verbose()}  # fmt: skip

    def answerer(self) -> LlamaAnswerer:
        budget = {} if self.context_tokens is None else {"context_tokens": self.context_tokens}
        return LlamaAnswerer(self.model, **self._model_options(), **budget)

    def driver(self) -> LlamaAgent:
        return LlamaAgent(self.model, **self._model_options())  # the agent reads tool results: no note budget


def gemma_prompt(system: str, user: str) -> str:
    """Gemma 3's chat template by hand: Gemma has no system role, so the system text leads the user turn."""
    return f"<start_of_turn>user\n{system}\n\n{user}{END_OF_TURN}\n<start_of_turn>model\n"


def completion_prompt(system: str, user: str) -> str:
    """For a base model with no chat template (the packaged 270M): plain text ending where the JSON starts."""
    return f"{system}\n\n{user}\n\n{REPLY_CUE}"


def has_chat_template(llm: Any) -> bool:
    """Whether the GGUF carries a chat template (instruction-tuned builds do; base models do not)."""
    return any("chat_template" in key for key in getattr(llm, "metadata", {}) or {})


def default_threads() -> int:
    """$VAULT2OKF_LLAMA_THREADS, else the physical cores not already busy (`free_cores`) now."""
    configured = os.environ.get(ENV_THREADS, "").strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return free_cores(physical_cores(), _busy_now())


def _busy_now(samples: int = 5, gap: float = 0.004) -> float:
    """How many other tasks want a core now: the fewest runnable tasks the kernel counts (``/proc/loadavg``'s
    fourth field) over a few samples 4 ms apart, less this process. The 1-minute load average lags by a minute:
    right after one command it still counts that command, and gave the next `ask` one thread on an idle 2-core
    machine, reading its prompt at ~300 tokens/s where two threads read ~550 (reports/bench-llama-threads.txt).
    Without ``/proc`` (not Linux) the load average it is."""
    try:
        running = []
        for i in range(samples):
            if i:
                time.sleep(gap)
            with open("/proc/loadavg", encoding="ascii") as loadavg:
                running.append(int(loadavg.read().split()[3].split("/")[0]))
    except (OSError, ValueError, IndexError):
        return _load_average()
    return float(max(0, min(running) - 1))


def free_cores(cores: int, load: float) -> int:
    """The cores that ``load`` other runnable tasks leave free, at least one: llama.cpp's threads meet at a
    barrier after every layer, so one thread waiting for a core stalls them all. Measured with the 270M on 2
    cores under a load of 6-9 (reports/bench-llama-threads.txt): 2 threads read a prompt at 21-105 tokens/s, 1
    thread at 46-236; idle, 455-652 vs 262-349."""
    return max(1, min(cores, cores - int(load)))


def _load_average() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def physical_cores() -> int:
    """Cores this process may run on, halved when SMT siblings are visible (llama.cpp gains nothing from them)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, usable // _threads_per_core())


def _threads_per_core() -> int:
    try:
        siblings = Path("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list").read_text()
    except OSError:
        return 1
    return max(1, sum(len(range(*_span(part))) for part in siblings.strip().split(",") if part))


def _span(part: str) -> tuple[int, int]:
    low, _, high = part.partition("-")
    return int(low), int(high or low) + 1


def default_model_path() -> tuple[Path, str | None]:
    """The GGUF named by $VAULT2OKF_GGUF, else the packaged Gemma 3 270M with a notice saying it is tiny."""
    configured = os.environ.get(ENV_MODEL)
    if configured:
        return Path(configured).expanduser(), None
    from retriever.answer import packaged

    try:
        package = packaged.packaged_module()
    except ImportError as error:
        raise AnswerError(
            "no GGUF model given — pass --model /path/gemma-3-4b-it-Q4_K_M.gguf, set "
            f"{ENV_MODEL}, or pip install 'vault2okf[offline]' for the tiny Gemma 3 270M"
        ) from error
    return packaged.assemble(package=package), TINY_MODEL_NOTICE


def resolve_model_path(model_path: str | Path | None) -> tuple[Path, str | None]:
    """The model file and its notice; an AnswerError before anything loads when there is no such file, or it is
    a folder, a FIFO or a file that is not GGUF (`llama_check.model_file_problem`: never blamed on llama.cpp)."""
    from retriever.answer.llama_check import model_file_problem

    path, notice = (Path(model_path).expanduser(), None) if model_path else default_model_path()
    if not path.exists():
        raise AnswerError(f"GGUF model file not found: {path} — check --model or {ENV_MODEL}")
    problem = model_file_problem(path)
    if problem:
        raise AnswerError(f"{problem} — check --model or {ENV_MODEL}")
    return path, notice


@dataclass(frozen=True)
class PromptEval:
    """What llama.cpp did with one prompt: `evaluated` tokens decoded in `ms`; the other `reused` tokens came from
    the previous question's KV cache (the same `Llama` object keeps it: the fixed system text leads every prompt)."""

    tokens: int
    evaluated: int
    ms: float

    @property
    def reused(self) -> int:
        return self.tokens - self.evaluated


class LlamaModel:
    """A local GGUF: the file (and a notice when it is the tiny packaged model), the context, the threads. The
    answerer and the agent loop's driver (``LlamaAgent``) are built on it."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        n_ctx: int = 8192,
        n_gpu_layers: int = 0,
        answer_tokens: int = ANSWER_TOKENS,
        temperature: float = 0.0,
        verbose: bool = False,
        n_threads: int | None = None,
        n_batch: int = 512,
    ) -> None:
        self.model_path, self.notice = resolve_model_path(model_path)
        self.model = self.model_path.name
        self.n_ctx, self.n_gpu_layers, self.answer_tokens = n_ctx, n_gpu_layers, answer_tokens
        self.temperature, self.verbose, self.n_threads, self.n_batch = temperature, verbose, n_threads, n_batch


class LlamaAnswerer(LlamaModel):
    """Grounded, structured answers from a local GGUF; `notice` is set when the tiny packaged model is used.

    `n_ctx` is the largest context the answerer will use; the context actually allocated fits the prompts
    seen so far. `n_threads` defaults to the physical cores, `n_batch` is the prompt-processing batch.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        per_note_tokens: int = DEFAULT_PER_NOTE_TOKENS,
        context_tokens: int = DEFAULT_CONTEXT_TOKENS,
        n_threads: int | None = None,
        n_batch: int = 1024,
        repeat_penalty: float = REPEAT_PENALTY,
        **options: Any,
    ) -> None:
        super().__init__(model_path, n_threads=n_threads or default_threads(), n_batch=n_batch, **options)
        if self.notice:
            log.info(self.notice)
        self.per_note_tokens = per_note_tokens
        self.context_tokens = context_tokens
        self.repeat_penalty = repeat_penalty
        self._llm: Any = None
        self.context_size = 0  # tokens of the context allocated now (0 before the first answer)
        self.loads = 0
        self.last_eval: PromptEval | None = None  # the last answer's prompt processing

    @property
    def prompt_style(self) -> str:
        return "chat" if self._llm is not None and has_chat_template(self._llm) else "completion"

    def prompt(self, question: str, notes: Sequence[ContextNote]) -> str:
        """The exact prompt text for this question (public so it can be inspected)."""
        render = gemma_prompt if self.prompt_style == "chat" else completion_prompt
        return render(*build_messages(question, notes, self.per_note_tokens))

    def answer(self, question: str, notes: Sequence[ContextNote], *, on_token: OnToken = None) -> Answer:
        """One structured answer; `on_token` gets the answer text as it is generated (never the JSON)."""
        notes = fit_context(notes, self.context_tokens, self.per_note_tokens)
        if self._llm is None:  # first answer: size the context from an estimate, load once
            estimate = count_tokens(completion_prompt(*build_messages(question, notes, self.per_note_tokens)))
            self._load(self._context_for(estimate * 3 // 2))
        prompt = self.prompt(question, notes)
        prompt_tokens = self._fit(prompt)
        headings = {n.note_id: note_headings(n) for n in notes}
        grammar = _grammar(gbnf(notes, headings), self.verbose)
        start = time.perf_counter()
        stream = AnswerStream() if on_token is not None else None
        raw, finish, completion_tokens = self._generate(prompt, prompt_tokens, grammar, stream, on_token)
        parsed = parse(raw, notes, headings)
        if stream is not None and on_token is not None:
            rest = stream.finish(parsed.text)
            if rest:
                on_token(rest)
        seconds = time.perf_counter() - start
        return parsed.answer(raw, finish, (prompt_tokens, completion_tokens), seconds, self.model)

    def _context_for(self, prompt_tokens: int) -> int:
        need = prompt_tokens + self.answer_tokens
        return min(self.n_ctx, -(-need // CTX_STEP) * CTX_STEP)

    def _load(self, n_ctx: int) -> None:
        self._llm = None  # free the old context before allocating the new one
        self._llm = load_llama(
            self.model_path, n_ctx=n_ctx, n_gpu_layers=self.n_gpu_layers, verbose=self.verbose,
            n_threads=self.n_threads, n_batch=min(self.n_batch, n_ctx),
        )  # fmt: skip
        self.context_size = n_ctx
        self.loads += 1

    def _fit(self, prompt: str) -> int:
        """Prompt tokens as llama.cpp counts them; grows the context if needed, an error past `n_ctx`."""
        count = len(self._llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))
        if count + self.answer_tokens > self.n_ctx:
            raise AnswerError(
                f"the prompt is {count} tokens and the answer may take {self.answer_tokens}, more than the "
                f"context of {self.n_ctx} — raise --n-ctx, retrieve less (--max-notes, --max-tokens) or lower "
                "--answer-tokens"
            )
        if count + self.answer_tokens > self.context_size:
            self._load(self._context_for(count))
        return count

    def _generate(
        self,
        prompt: str,
        prompt_tokens: int,
        grammar: Any,
        stream: AnswerStream | None,
        on_token: Callable[[str], None] | None,
    ) -> tuple[str, str, int]:
        """Raw reply text, finish reason and completion tokens; streams decoded answer text to `on_token`."""
        pieces: list[str] = []
        finish = "stop"
        options = self._options(prompt_tokens)
        _perf_reset(self._llm)
        chunks = self._llm.create_completion(prompt, stream=True, grammar=grammar, **options)
        for piece, reason in _chunks(chunks):
            if piece:
                pieces.append(piece)
                if stream is not None and on_token is not None:
                    shown = stream.feed(piece)
                    if shown:
                        on_token(shown)
            finish = reason or finish
        self.last_eval = _prompt_eval(self._llm, prompt_tokens)
        raw = "".join(pieces)
        tokens = len(self._llm.tokenize(raw.encode("utf-8"), add_bos=False, special=True)) if raw else 0
        return raw, finish, min(tokens, self.answer_tokens)

    def _options(self, prompt_tokens: int) -> dict[str, Any]:
        from llama_cpp import StoppingCriteriaList

        return {
            "max_tokens": self.answer_tokens,  # llama-cpp-python's name for the answer budget
            "temperature": self.temperature,
            "repeat_penalty": self.repeat_penalty,
            "stop": [END_OF_TURN, "<eos>"],
            "stopping_criteria": StoppingCriteriaList([_LoopStop(prompt_tokens)]),
        }


class _LoopStop:
    """Stop when the newest tokens repeat one short unit over and over (`- The Party` x 31): the answerer's and
    the agent driver's generations both."""

    def __init__(self, prompt_tokens: int) -> None:
        self.prompt_tokens = prompt_tokens

    def __call__(self, input_ids: Any, logits: Any) -> bool:
        return looping(list(input_ids[self.prompt_tokens :]))


def looping(tokens: Sequence[int]) -> bool:
    """The newest tokens are one unit of p tokens (p up to 32) repeated: three times, and 8 tokens at least."""
    for period in _LOOP_PERIODS:
        span = period * max(3, -(-8 // period))
        if len(tokens) < span:
            break
        tail = tokens[-span:]
        if all(tail[i] == tail[i % period] for i in range(period, span)):
            return True
    return False


def _perf_reset(llm: Any) -> None:
    from llama_cpp import llama_perf_context_reset

    llama_perf_context_reset(llm.ctx)


def _prompt_eval(llm: Any, prompt_tokens: int) -> PromptEval:
    """The prompt's share of llama.cpp's counters since `_perf_reset`: batches of more than one token."""
    from llama_cpp import llama_perf_context

    perf = llama_perf_context(llm.ctx)
    return PromptEval(prompt_tokens, perf.n_p_eval, round(perf.t_p_eval_ms, 1))


def _grammar(text: str, verbose: bool) -> Any:
    from llama_cpp import LlamaGrammar

    return LlamaGrammar.from_string(text, verbose=verbose)


def _chunks(stream: Iterator[dict[str, Any]]) -> Iterator[tuple[str, str | None]]:
    for chunk in stream:
        choice = chunk["choices"][0]
        yield choice["text"], choice["finish_reason"]


def load_llama(
    path: Path, *, n_ctx: int, n_gpu_layers: int, verbose: bool, n_threads: int | None = None, n_batch: int = 512
) -> Any:
    """A `llama_cpp.Llama`; `n_gpu_layers=-1` offloads every layer (needs a GPU build, e.g. Vulkan)."""
    from retriever.answer.llama_check import preflight

    if importlib.util.find_spec("llama_cpp") is None:
        raise AnswerError("llama-cpp-python is not installed — pip install 'vault2okf[ask]'")
    # A child process loads the library and decodes first: a native crash (a damaged library's SIGBUS, the AMX
    # path's SIGSEGV) is reported, not ours. Only then is llama_cpp imported here.
    preflight(path, n_gpu_layers=n_gpu_layers)
    try:
        from llama_cpp import Llama
    except (ImportError, OSError, RuntimeError) as error:
        raise AnswerError(f"llama-cpp-python does not load: {error} — run `vault2okf doctor`") from error
    threads = n_threads or default_threads()
    try:
        with contextlib.nullcontext() if verbose else _quiet_stderr():
            return Llama(
                model_path=str(path), n_ctx=n_ctx, n_gpu_layers=n_gpu_layers, verbose=verbose,
                n_threads=threads, n_threads_batch=threads, n_batch=n_batch, n_ubatch=min(n_batch, 512),
            )  # fmt: skip
    except (ValueError, RuntimeError) as error:
        raise AnswerError(f"llama.cpp could not load {path}: {error} — is it a GGUF file?") from error


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Standard error muted, both Python's and file descriptor 2: llama-cpp-python passes some llama.cpp load
    lines (the SWA cache notice) to `sys.stderr` even when `verbose=False`, and llama.cpp writes others itself."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class LlamaAgent(LlamaModel):
    """The agent loop's model: a local GGUF, one grammar-constrained JSON object per step (``contract.Driver``).

    The transcript is re-sent each step; llama-cpp-python keeps the evaluated prefix, so a step costs its new
    tokens. A result that would overflow ``n_ctx`` is left out (oldest first) and the model is told so.
    """

    def __init__(self, model_path: str | Path | None = None, **options: Any) -> None:
        super().__init__(model_path, **options)
        self._llm: Any = None
        self.question = ""
        self.turns: list[tuple[str, str]] = []  # (the call as the model wrote it, the result as it reads it)
        self.dropped = 0  # oldest results left out to fit the context
        self.tools: tuple[str, ...] = ()  # the tools of the last step, as the prompt names them

    def _load(self) -> Any:
        if self._llm is None:
            self._llm = load_llama(
                self.model_path, n_ctx=self.n_ctx, n_gpu_layers=self.n_gpu_layers, verbose=self.verbose,
                n_threads=self.n_threads, n_batch=min(self.n_batch, self.n_ctx),
            )  # fmt: skip
        return self._llm

    @property
    def chat(self) -> bool:
        return self._llm is not None and has_chat_template(self._llm)

    def start(self, question: str) -> None:
        self.question, self.turns, self.dropped = " ".join(neutralise(question).split()), [], 0

    def inject(self, call_id: str, result: ToolOutput) -> None:
        self.feed([(call_id, result)])

    def feed(self, results: Sequence[tuple[str, ToolOutput]]) -> None:
        for _, result in results:
            self.turns.append((call_text(result.tool, result.arguments), quoted(result.text)))

    def prompt(self, *, final: bool) -> str:
        """The transcript as the model reads it (chat turns for a GGUF with a chat template, else plain text)."""
        n = len(self.turns) + 1
        cue = f"Call {n}: " if not final else f"Call {n} (the step budget is spent: the {ANSWER_TOOL} tool): "
        lead = f"{SYSTEM_PROMPT}\n\nTools: {', '.join([*self.tools, ANSWER_TOOL])}.\n\nQuestion: {self.question}"
        shown = [
            (call, "(result left out to fit the context)" if i < self.dropped else result)
            for i, (call, result) in enumerate(self.turns)
        ]
        if self.chat:
            parts = [f"<start_of_turn>user\n{lead}<end_of_turn>\n"]
            for i, (call, result) in enumerate(shown, start=1):
                parts.append(f"<start_of_turn>model\nCall {i}: {call}<end_of_turn>\n")
                parts.append(f"<start_of_turn>user\nResult {i}:\n{result}<end_of_turn>\n")
            return "".join(parts) + f"<start_of_turn>model\n{cue}"
        body = "".join(f"Call {i}: {call}\nResult {i}:\n{result}\n\n" for i, (call, result) in enumerate(shown, 1))
        return f"{lead}\n\n{body}{cue}"

    def decide(self, step: Step) -> Decision:
        from llama_cpp import LlamaGrammar, StoppingCriteriaList

        llm = self._load()
        self.tools = tuple(name for name, _, _ in step.tools)
        prompt, count = self._fitting(step.final)
        grammar = LlamaGrammar.from_json_schema(json.dumps(step_schema(step)), verbose=self.verbose)
        out = llm.create_completion(
            prompt, grammar=grammar, max_tokens=self.answer_tokens, temperature=self.temperature,
            repeat_penalty=REPEAT_PENALTY, stop=[END_OF_TURN, "<eos>"],
            stopping_criteria=StoppingCriteriaList([_LoopStop(count)]),
        )  # fmt: skip
        raw = out["choices"][0]["text"]
        finish = "length" if out["choices"][0].get("finish_reason") == "length" else "stop"
        completion = int(out.get("usage", {}).get("completion_tokens", 0))
        data = load_json(raw)
        tokens = {"prompt_tokens": count, "completion_tokens": completion, "raw": raw, "finish": finish}
        if data is None or data.get("tool") == ANSWER_TOOL or not isinstance(data.get("arguments"), dict):
            answer = data.get("arguments") if data and isinstance(data.get("arguments"), dict) else _inner(raw)
            return Decision(answer=answer, **tokens)
        return Decision(calls=((f"call_{len(self.turns) + 1}", str(data["tool"]), data["arguments"]),), **tokens)

    def _fitting(self, final: bool) -> tuple[str, int]:
        llm = self._load()
        while True:
            prompt = self.prompt(final=final)
            count = len(llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))
            if count + self.answer_tokens <= self.n_ctx:
                return prompt, count
            if self.dropped >= len(self.turns):
                raise AnswerError(
                    f"the agent's prompt is {count} tokens and the answer may take {self.answer_tokens}, more "
                    f"than the context of {self.n_ctx}: raise --n-ctx or lower --answer-tokens"
                )
            self.dropped += 1


def step_schema(step: Step) -> dict[str, Any]:
    """One step of a local model: a call the step allows (its search query capped at ``QUERY_CHARS``) or the
    answer, which cites only the notes seen (``contract.json_schema``, strict)."""
    answer = {
        "type": "object",
        "properties": {
            "tool": {"const": ANSWER_TOOL},
            "arguments": json_schema(step.notes, step.headings, strict=True),
        },
        "required": ["tool", "arguments"],
        "additionalProperties": False,
    }
    if step.calls is None:
        return answer
    calls = copy.deepcopy(step.calls["anyOf"])  # the step's schema may share the tool declarations' dicts
    for call in calls:
        query = call["properties"]["arguments"]["properties"].get("query")
        if call["properties"]["tool"]["const"] == "search" and query:
            query["maxLength"] = min(query.get("maxLength", QUERY_CHARS), QUERY_CHARS)
    return {"anyOf": [*calls, answer]}


def _inner(raw: str) -> str:
    """An answer call cut off past repair here: its ``arguments`` text, which ``contract.parse`` closes the
    ways an answer can be cut (inside the text, inside a citation)."""
    key = raw.find('"arguments":')
    return raw[key + len('"arguments":') :].strip() if raw.lstrip().startswith('{"tool"') and key >= 0 else raw
