"""One way to ask: retrieve, build the context, answer, report: the same for every front end.

``ask``, ``chat``, ``eval``, the agent path and the server all ask through an ``Asker``: an opened retriever with
its search options, and an answer spec (``retriever.answer.backends.AnswerSpec``) whose answerer (or, with an
``AgentSpec``, whose agent driver) is built once, on first use. So the same question with the same options gives
the same prompt from every front end: the context notes always carry the type and session of the concept each hit
was made from. ``AskResult`` is the one result of an answer, single-shot or agent, and its ``to_json`` is
``ask --json``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from retriever.agent.spec import AgentSpec
from retriever.answer.backends import AnswerSpec
from retriever.answer.contract import Answer, Answerer, ContextNote, Driver, OnToken
from retriever.answer.prompt import context_notes
from retriever.errors import check_decodable
from retriever.retrieve import Retrieval, Retriever, SearchSpec

if TYPE_CHECKING:  # the loop and its tools load only for an agent
    from retriever.agent.loop import AgentResult, Call
    from retriever.agent.tools import BundleTools


@dataclass(frozen=True)
class AskResult:
    """An answer and how it came: the retrieval it was given (single-shot) or the agent's run (``agent``)."""

    question: str
    answer: Answer
    retrieval: Retrieval | None = None
    timings: dict[str, float] = field(default_factory=dict)  # milliseconds (single-shot)
    agent: AgentResult | None = None

    @property
    def context(self) -> tuple[ContextNote, ...]:
        """The notes the answer could cite: the retrieval's, or those the agent's tools showed."""
        if self.agent is not None:
            return self.agent.context
        return tuple(context_notes(self.retrieval)) if self.retrieval is not None else ()

    def to_json(self) -> dict[str, Any]:
        """``ask --json`` (and ``ask --agent --json``): the answer, its citations, then how it came."""
        a = self.answer
        head: dict[str, Any] = {
            "question": self.question,
            "answer": a.text,
            "not_found": a.not_found,
            "supported": a.supported,
            **({"support": a.support} if a.support else {}),
            "flag": a.flag,
            "citations": [{**c.to_json(), "ref": c.ref} for c in a.citations],
        }
        model = {"model": a.model, "finish_reason": a.finish_reason}
        if self.agent is not None:
            return {**head, **model, "notes_read": self.agent.notes_read, "trace": self.agent.trace_json()}
        r = self.retrieval
        retrieval = {} if r is None else {
            "retrieved": [h.to_json() for h in r.hits],
            "retrieval": {"mode": r.mode, "k": r.k, "ranker": r.ranker, "notes": r.notes, "tokens": r.tokens,
                          "left_out": r.left_out},
        }  # fmt: skip
        tokens = {"tokens": {"prompt": a.prompt_tokens, "completion": a.completion_tokens}}
        return {**head, **retrieval, **model, **tokens, "timings_ms": self.timings}


class Asker:
    """Questions over one opened bundle, answered the one way (see the module docstring); not thread-safe for
    answers (a model generates one answer at a time), while ``search`` only reads."""

    def __init__(
        self,
        retriever: Retriever,
        spec: SearchSpec,
        answer: AnswerSpec | None = None,
        agent: AgentSpec | None = None,
        *,
        answerer: Answerer | None = None,
    ) -> None:
        """``answer`` says how to build the answerer (or driver) on first use; or pass a built ``answerer`` (a
        server shares one model between the askers of its bundles)."""
        if answer is None and answerer is None:
            raise TypeError("an Asker needs an answer spec or an answerer")
        self.retriever, self.spec, self.answer_spec, self.agent = retriever, spec, answer, agent
        self._answerer: Answerer | None = answerer
        self._driver: Driver | None = None
        self._tools: BundleTools | None = None

    @property
    def answerer(self) -> Answerer:
        if self._answerer is None:
            self._answerer = self._spec().answerer()
        return self._answerer

    @property
    def driver(self) -> Driver:
        if self._driver is None:
            self._driver = self._spec().driver()
        return self._driver

    def _spec(self) -> AnswerSpec:
        if self.answer_spec is None:
            raise TypeError("this Asker was given an answerer, not an answer spec: it has no agent driver")
        return self.answer_spec

    @property
    def notice(self) -> str | None:
        """What the model wants said before the first answer (the tiny packaged model is in use)."""
        return (self.driver if self.agent is not None else self.answerer).notice

    @property
    def model(self) -> str:
        return (self.driver if self.agent is not None else self.answerer).model

    def search(self, question: str) -> Retrieval:
        return self.retriever.search(question, self.spec)

    def ask(
        self,
        question: str,
        *,
        on_token: OnToken = None,
        on_retrieved: Callable[[Retrieval], None] | None = None,
        on_call: Callable[[Call], None] | None = None,
        started: float | None = None,
    ) -> AskResult:
        """Retrieve, then answer from the retrieved notes (or, with an agent spec, let the model search).

        ``on_retrieved`` gets the retrieval before the answerer starts (a terminal shows the sources while the
        model loads); ``on_call`` each tool call of the agent. With ``started`` (a ``time.perf_counter()`` value:
        the process's start), the timings gain ``first_token``: milliseconds from then to the first piece of
        answer text (to the whole answer when the answerer gives it at once)."""
        check_decodable(question)
        if self.agent is not None:
            return self._ask_agent(question, self.agent, on_call)
        retrieval = self.search(question)
        if on_retrieved is not None:
            on_retrieved(retrieval)
        return self.answer_from(question, retrieval, on_token=on_token, started=started)

    def answer_from(
        self, question: str, retrieval: Retrieval, *, on_token: OnToken = None, started: float | None = None
    ) -> AskResult:
        """The single-shot answer from ``retrieval`` (eval answers from retrievals it already made)."""
        start = time.perf_counter()
        first: list[float] = []

        def token(piece: str) -> None:
            if not first:
                first.append(time.perf_counter())
            if on_token is not None:
                on_token(piece)

        answer = self.answerer.answer(question, context_notes(retrieval), on_token=token)
        done = time.perf_counter()
        timings = {**retrieval.timings, "answer_ms": round((done - start) * 1000, 1)}
        if started is not None:
            timings["first_token"] = round(((first[0] if first else done) - started) * 1000, 1)
        return AskResult(question, answer, retrieval, timings)

    def _ask_agent(self, question: str, agent: AgentSpec, on_call: Callable[[Call], None] | None) -> AskResult:
        from retriever.agent.loop import run_agent
        from retriever.agent.tools import BundleTools

        if self._tools is None:
            self._tools = BundleTools(self.retriever.bundle, spec=self.spec, retriever=self.retriever)
        run = run_agent(question, self._tools, self.driver, steps=agent.steps, prefetch=agent.prefetch,
                        on_call=on_call)  # fmt: skip
        return AskResult(question, run.answer, agent=run)

    def close(self) -> None:
        if self._tools is not None:
            self._tools.close()
            self._tools = None

    def __enter__(self) -> Asker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
