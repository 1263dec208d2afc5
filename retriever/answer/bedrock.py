"""Answer backend: Amazon Bedrock through boto3 `bedrock-runtime` Converse.

The answer comes back as the input of one forced tool, `answer`, whose JSON Schema (`structured.json_schema`)
is the answer contract with `note_id` and `heading` enums of the context; a model that writes text instead is
parsed as JSON text the same way. Citations outside the context are dropped either way.

The module holds the backend whole: its options (`BedrockOptions`), the client (`BedrockModel`), the single-shot
answerer (`BedrockAnswerer`) and the agent loop's driver (`BedrockAgent`: Converse with `toolConfig`, the tools
plus an `answer` tool whose input schema is the answer contract over the notes seen so far; `toolChoice` forces
`answer` on the final step).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from retriever.answer.agent_prompt import ANSWER_DESCRIPTION, ANSWER_TOOL, SYSTEM_PROMPT, quoted
from retriever.answer.contract import Decision, OnToken, Step, ToolOutput, json_schema, parse
from retriever.answer.prompt import DEFAULT_PER_NOTE_TOKENS, build_messages, note_headings
from retriever.answer.records import ANSWER_TOKENS, Answer, AnswerError, ContextNote

RETRYABLE = frozenset({"ThrottlingException", "ServiceUnavailableException", "ModelNotReadyException"})
FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "stop", "max_tokens": "length"}
TOOL = "answer"
TOOL_DESCRIPTION = "Give the answer to the question from the notes, with the notes (and sections) it comes from."
NO_CREDENTIALS = (
    "no AWS credentials found — run `aws configure` or set AWS_PROFILE (or AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY) before using the bedrock backend"
)
NO_REGION = (
    "no AWS region set for Bedrock — pass --region (e.g. us-east-1), set AWS_REGION or AWS_DEFAULT_REGION, "
    "or add `region = ...` to your profile in ~/.aws/config"
)


@dataclass(frozen=True)
class BedrockOptions:
    """``--llm bedrock``: the model ID (required), where and as whom to call it, and the answer budget."""

    model: str | None = None
    region: str | None = None  # else AWS_REGION, else the profile's
    profile: str | None = None  # else AWS_PROFILE
    answer_tokens: int = ANSWER_TOKENS

    def check(self) -> None:
        if not self.model:
            raise AnswerError(
                "the bedrock backend needs a model ID — pass --model, e.g. --model us.amazon.nova-lite-v1:0"
            )

    def answerer(self) -> BedrockAnswerer:
        return BedrockAnswerer(self.model or "", region=self.region, profile=self.profile,
                               answer_tokens=self.answer_tokens)  # fmt: skip

    def driver(self) -> BedrockAgent:
        return BedrockAgent(self.model or "", region=self.region, profile=self.profile,
                            answer_tokens=self.answer_tokens)  # fmt: skip


class BedrockModel:
    """A Bedrock model behind Converse: its model ID, client and retries. The answerer and the agent loop's
    driver (``BedrockAgent``) are built on it, so the client is made in one place."""

    notice: str | None = None  # nothing to say before the first answer

    def __init__(
        self,
        model_id: str,
        region: str | None = None,
        profile: str | None = None,
        answer_tokens: int = ANSWER_TOKENS,
        temperature: float = 0.0,
        client: Any | None = None,
        max_retries: int = 4,
        base_delay: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model_id
        self.answer_tokens, self.temperature = answer_tokens, temperature
        self.max_retries, self.base_delay, self._sleep = max_retries, base_delay, sleep
        self._client = client if client is not None else make_client(region, profile)

    def _converse(self, request: dict[str, Any]) -> dict[str, Any]:
        """Call Converse, backing off exponentially on throttling / unavailable / model-not-ready."""
        from botocore.exceptions import BotoCoreError, ClientError

        for attempt in range(self.max_retries + 1):
            try:
                return self._client.converse(**request)
            except ClientError as error:
                if error_code(error) not in RETRYABLE or attempt == self.max_retries:
                    raise explain(error, self.model, self.max_retries) from error
                self._sleep(self.base_delay * 2**attempt)
            except BotoCoreError as error:
                raise explain(error, self.model, self.max_retries) from error
        raise AssertionError("unreachable")  # pragma: no cover


class BedrockAnswerer(BedrockModel):
    """Grounded answers from a Bedrock model; `model_id` is the one string Bedrock knows the model by."""

    def __init__(self, model_id: str, *, per_note_tokens: int = DEFAULT_PER_NOTE_TOKENS, **options: Any) -> None:
        super().__init__(model_id, **options)
        self.per_note_tokens = per_note_tokens

    def request(self, question: str, notes: Sequence[ContextNote]) -> dict[str, Any]:
        """The Converse request for this question (public so its shape can be inspected)."""
        system, user = build_messages(question, notes, self.per_note_tokens)
        schema = json_schema(notes, {n.note_id: note_headings(n) for n in notes})
        spec = {"name": TOOL, "description": TOOL_DESCRIPTION, "inputSchema": {"json": schema}}
        return {
            "modelId": self.model,
            "system": [{"text": system + f"\nGive the reply through the `{TOOL}` tool."}],
            "messages": [{"role": "user", "content": [{"text": user}]}],
            "inferenceConfig": {"maxTokens": self.answer_tokens, "temperature": self.temperature},
            "toolConfig": {"tools": [{"toolSpec": spec}], "toolChoice": {"tool": {"name": TOOL}}},
        }

    def answer(self, question: str, notes: Sequence[ContextNote], *, on_token: OnToken = None) -> Answer:
        """Ask Converse; `on_token` (if given) gets the whole text at once: Converse is not streamed."""
        start = time.perf_counter()
        response = self._converse(self.request(question, notes))
        reply, finish, prompt_tokens, completion_tokens = parse_response(response)
        parsed = parse(reply, notes, {n.note_id: note_headings(n) for n in notes})
        if on_token is not None and parsed.text:
            on_token(parsed.text)
        seconds = time.perf_counter() - start
        return parsed.answer(reply, finish, (prompt_tokens, completion_tokens), seconds, self.model)


class BedrockAgent(BedrockModel):
    """The agent loop's model on Bedrock (``contract.Driver``): Converse with the tools and the ``answer`` tool."""

    def __init__(self, model_id: str, **options: Any) -> None:
        super().__init__(model_id, **options)
        self.messages: list[dict[str, Any]] = []

    def start(self, question: str) -> None:
        self.messages = [{"role": "user", "content": [{"text": f"Question: {' '.join(question.split())}"}]}]

    def inject(self, call_id: str, result: ToolOutput) -> None:
        use = {"toolUse": {"toolUseId": call_id, "name": result.tool, "input": dict(result.arguments)}}
        self.messages.append({"role": "assistant", "content": [use]})
        self.feed([(call_id, result)])

    def feed(self, results: Sequence[tuple[str, ToolOutput]]) -> None:
        blocks = [
            {"toolResult": {"toolUseId": call_id, "content": [{"text": quoted(r.text)}],
                            "status": "error" if r.is_error else "success"}}
            for call_id, r in results
        ]  # fmt: skip
        self.messages.append({"role": "user", "content": blocks})

    def request(self, step: Step) -> dict[str, Any]:
        """The Converse request of this step (public so its shape can be inspected)."""
        schema = json_schema(step.notes, step.headings)
        answer = {"name": ANSWER_TOOL, "description": ANSWER_DESCRIPTION, "inputSchema": {"json": schema}}
        tools = [{"toolSpec": {"name": name, "description": text, "inputSchema": {"json": params}}}
                 for name, text, params in step.tools]  # fmt: skip
        choice = {"tool": {"name": ANSWER_TOOL}} if step.final else {"auto": {}}
        return {
            "modelId": self.model,
            "system": [{"text": SYSTEM_PROMPT}],
            "messages": self.messages,
            "inferenceConfig": {"maxTokens": self.answer_tokens, "temperature": self.temperature},
            "toolConfig": {"tools": [*tools, {"toolSpec": answer}], "toolChoice": choice},
        }

    def decide(self, step: Step) -> Decision:
        response = self._converse(self.request(step))
        message = response.get("output", {}).get("message", {"role": "assistant", "content": []})
        self.messages.append(message)
        usage = response.get("usage", {})
        stop = response.get("stopReason", "")
        tokens = {"prompt_tokens": int(usage.get("inputTokens", 0)),
                  "completion_tokens": int(usage.get("outputTokens", 0)), "finish": FINISH.get(stop, stop)}  # fmt: skip
        uses = [b["toolUse"] for b in message.get("content", []) if "toolUse" in b]
        text = "".join(b["text"] for b in message.get("content", []) if "text" in b)
        answered = [u.get("input") for u in uses if u.get("name") == ANSWER_TOOL]
        if answered or not uses:
            reply = answered[0] if answered and isinstance(answered[0], dict) else text
            return Decision(answer=reply, raw=text, **tokens)
        calls = tuple((u["toolUseId"], u["name"], dict(u.get("input") or {})) for u in uses)
        return Decision(calls=calls, raw=text, **tokens)


def make_client(region: str | None, profile: str | None) -> Any:
    """A `bedrock-runtime` client; botocore's own retries are off because `_converse` retries."""
    try:
        import boto3
        from botocore.config import Config
        from botocore.exceptions import ProfileNotFound
    except ImportError as error:
        raise AnswerError("boto3 is not installed — pip install 'vault2okf[ask]'") from error
    try:
        session = boto3.Session(profile_name=profile or os.environ.get("AWS_PROFILE") or None)
    except ProfileNotFound as error:
        raise AnswerError(f"{error} — check the name with `aws configure list-profiles`") from error
    region = region or os.environ.get("AWS_REGION") or session.region_name
    if not region:
        raise AnswerError(NO_REGION)
    config = Config(retries={"total_max_attempts": 1, "mode": "standard"}, read_timeout=300)
    return session.client("bedrock-runtime", region_name=region, config=config)


def parse_response(response: dict[str, Any]) -> tuple[str | dict[str, Any], str, int, int]:
    """(the `answer` tool's input, else the text; finish reason; input tokens; output tokens) from Converse."""
    content = response.get("output", {}).get("message", {}).get("content", [])
    tool_inputs = [b["toolUse"].get("input") for b in content if b.get("toolUse", {}).get("name") == TOOL]
    reply: str | dict[str, Any] = next((i for i in tool_inputs if isinstance(i, dict)), None) or "".join(
        block["text"] for block in content if "text" in block
    )
    stop = response.get("stopReason", "")
    usage = response.get("usage", {})
    return reply, FINISH.get(stop, stop), usage.get("inputTokens", 0), usage.get("outputTokens", 0)


def error_code(error: Exception) -> str:
    return getattr(error, "response", {}).get("Error", {}).get("Code", "")


def explain(error: Exception, model_id: str, retries: int) -> AnswerError:
    """Turn a boto error into an AnswerError that says what happened and how to fix it."""
    from botocore.exceptions import NoCredentialsError, NoRegionError, PartialCredentialsError

    if isinstance(error, NoCredentialsError | PartialCredentialsError):
        return AnswerError(NO_CREDENTIALS)
    if isinstance(error, NoRegionError):
        return AnswerError(NO_REGION)
    return AnswerError(_explain_code(error_code(error), _aws_message(error), model_id, retries))


def _explain_code(code: str, message: str, model_id: str, retries: int) -> str:
    if code == "AccessDeniedException":
        return (
            f"access denied to Bedrock model {model_id!r} — request model access in the Bedrock console "
            "(Model access) for this region and allow bedrock:InvokeModel in your IAM policy. "
            f"AWS said: {message}"
        )
    if code == "ResourceNotFoundException" or (code == "ValidationException" and "model" in message.lower()):
        return (
            f"unknown or unsupported Bedrock model ID {model_id!r} — list the IDs with "
            f"`aws bedrock list-foundation-models`; some models need an inference profile ID "
            f"such as 'us.<model id>'. AWS said: {message}"
        )
    if code in RETRYABLE:
        return f"Bedrock still answered {code} after {retries} retries — try again later. AWS said: {message}"
    return f"Bedrock request failed ({code or 'error'}): {message}"


def _aws_message(error: Exception) -> str:
    return getattr(error, "response", {}).get("Error", {}).get("Message", "") or str(error)
