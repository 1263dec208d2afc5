from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from retriever.answer.backends import get_answerer
from retriever.answer.bedrock import TOOL_DESCRIPTION, BedrockAnswerer
from retriever.answer.contract import AnswerError, Citation, ContextNote, json_schema
from retriever.answer.prompt import build_messages

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
PATH = "concepts/Sessions/Session 3.md"
NOTES = [
    ContextNote("Sessions/Session 3", "Session 3", PATH, "## Arrival\nMira.", "vector", 0.9),
    ContextNote("People/Mira", "Mira", "concepts/People/Mira.md", "Mira is a smuggler.", "hop", 0.4),
]
QUESTION = "Who did we meet?"
TOOL_INPUT = {
    "answer": "You met Mira.",
    "citations": [
        {"note_id": "Sessions/Session 3", "heading": "Arrival"},
        {"note_id": "Dragons/Nowhere", "heading": ""},  # not in the context: dropped
    ],
    "not_found": False,
}


def tool_response(tool_input, stop="tool_use"):
    """A Converse response in the real API shape: the forced tool's input in a toolUse block."""
    return {
        "output": {
            "message": {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "tooluse_1", "name": "answer", "input": tool_input}}],
            }
        },
        "stopReason": stop,
        "usage": {"inputTokens": 321, "outputTokens": 12, "totalTokens": 333},
        "metrics": {"latencyMs": 420},
    }


RESPONSE = tool_response(TOOL_INPUT)


@pytest.fixture
def client():
    return boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")


@pytest.fixture
def sleeps():
    return []


@pytest.fixture
def answerer(client, sleeps):
    return BedrockAnswerer(MODEL, client=client, answer_tokens=256, sleep=sleeps.append)


def expected_request():
    system, user = build_messages(QUESTION, NOTES)
    schema = json_schema(NOTES, {"Sessions/Session 3": ["Arrival"], "People/Mira": []})
    return {
        "modelId": MODEL,
        "system": [{"text": system + "\nGive the reply through the `answer` tool."}],
        "messages": [{"role": "user", "content": [{"text": user}]}],
        "inferenceConfig": {"maxTokens": 256, "temperature": 0.0},
        "toolConfig": {
            "tools": [
                {"toolSpec": {"name": "answer", "description": TOOL_DESCRIPTION, "inputSchema": {"json": schema}}}
            ],
            "toolChoice": {"tool": {"name": "answer"}},
        },
    }


def test_request_forces_the_answer_tool_with_context_enums(answerer):
    request = answerer.request(QUESTION, NOTES)
    schema = request["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]
    item = schema["properties"]["citations"]["items"]["properties"]
    assert item["note_id"]["enum"] == ["Sessions/Session 3", "People/Mira"]
    assert item["heading"]["enum"] == ["", "Arrival"]
    assert request["toolConfig"]["toolChoice"] == {"tool": {"name": "answer"}}
    assert "| Mira." in request["messages"][0]["content"][0]["text"]  # the note is quoted data


def test_request_shape_and_response_parsing(client, answerer):
    with Stubber(client) as stub:
        stub.add_response("converse", RESPONSE, expected_request())
        answer = answerer.answer(QUESTION, NOTES)
        stub.assert_no_pending_responses()
    assert answer.text == "You met Mira."
    assert answer.citations == (Citation("Session 3", PATH, "Sessions/Session 3", "Arrival"),)
    assert not answer.not_found and answer.supported
    assert (answer.finish_reason, answer.prompt_tokens, answer.completion_tokens) == ("stop", 321, 12)
    assert answer.model == MODEL
    assert answer.seconds >= 0


def test_a_not_found_tool_reply_is_not_found(client, answerer):
    reply = {"answer": "not found in the vault", "citations": [], "not_found": True}
    with Stubber(client) as stub:
        stub.add_response("converse", tool_response(reply), expected_request())
        answer = answerer.answer(QUESTION, NOTES)
    assert answer.not_found and answer.citations == ()


def test_a_text_reply_is_parsed_as_json_and_leaked_tags_are_cut(client, answerer):
    cited = '[{"note_id": "People/Mira", "heading": ""}]'
    text = f'{{"answer": "50 gold each</note>", "citations": {cited}, "not_found": false}}'
    response = {**RESPONSE, "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
                "stopReason": "end_turn"}  # fmt: skip
    with Stubber(client) as stub:
        stub.add_response("converse", response, expected_request())
        answer = answerer.answer(QUESTION, NOTES)
    assert answer.text == "50 gold each"
    assert [c.note_id for c in answer.citations] == ["People/Mira"]


def test_an_uncited_text_reply_is_unsupported(client, answerer):
    response = {**RESPONSE, "output": {"message": {"role": "assistant", "content": [{"text": "Koko the dog."}]}},
                "stopReason": "end_turn"}  # fmt: skip
    with Stubber(client) as stub:
        stub.add_response("converse", response, expected_request())
        answer = answerer.answer(QUESTION, NOTES)
    assert answer.text == "Koko the dog." and not answer.supported and not answer.not_found
    assert answer.finish_reason == "invalid"


def test_max_tokens_stop_reason_is_length_and_on_token_gets_the_text(client, answerer):
    tokens = []
    with Stubber(client) as stub:
        stub.add_response("converse", tool_response(TOOL_INPUT, stop="max_tokens"), expected_request())
        answer = answerer.answer(QUESTION, NOTES, on_token=tokens.append)
    assert answer.finish_reason == "length"
    assert "".join(tokens) == answer.text


def test_throttling_is_retried_with_exponential_backoff(client, answerer, sleeps):
    with Stubber(client) as stub:
        for _ in range(2):
            stub.add_client_error("converse", "ThrottlingException", "Too many requests", 429)
        stub.add_response("converse", RESPONSE, expected_request())
        answer = answerer.answer(QUESTION, NOTES)
        stub.assert_no_pending_responses()
    assert answer.text == "You met Mira."
    assert sleeps == [0.5, 1.0]


def test_retries_give_up_with_a_clear_message(client, sleeps):
    answerer = BedrockAnswerer(MODEL, client=client, max_retries=2, sleep=sleeps.append)
    with Stubber(client) as stub:
        for _ in range(3):
            stub.add_client_error("converse", "ServiceUnavailableException", "busy", 503)
        with pytest.raises(AnswerError, match="ServiceUnavailableException after 2 retries"):
            answerer.answer(QUESTION, NOTES)
    assert sleeps == [0.5, 1.0]


def test_access_denied_says_to_request_model_access(client, answerer, sleeps):
    with Stubber(client) as stub:
        stub.add_client_error("converse", "AccessDeniedException", "You don't have access to the model", 403)
        with pytest.raises(AnswerError, match="request model access in the Bedrock console"):
            answerer.answer(QUESTION, NOTES)
    assert sleeps == []


def test_unknown_model_id_is_named(client, answerer):
    with Stubber(client) as stub:
        stub.add_client_error("converse", "ValidationException", "The provided model identifier is invalid.", 400)
        with pytest.raises(AnswerError, match=f"unknown or unsupported Bedrock model ID '{MODEL}'"):
            answerer.answer(QUESTION, NOTES)


def test_other_validation_errors_pass_the_aws_message_through(client, answerer):
    with Stubber(client) as stub:
        stub.add_client_error("converse", "ValidationException", "Input is too long.", 400)
        with pytest.raises(AnswerError, match=r"ValidationException\): Input is too long"):
            answerer.answer(QUESTION, NOTES)


@pytest.fixture
def no_aws(monkeypatch, tmp_path):
    """An environment where botocore finds no credentials, no region and never asks the network."""
    for name in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "missing-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "missing-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_missing_credentials_say_how_to_configure(no_aws):
    answerer = get_answerer("bedrock", model=MODEL, region="us-east-1", sleep=lambda s: None)
    with pytest.raises(AnswerError, match=r"no AWS credentials found — run `aws configure` or set AWS_PRO"):
        answerer.answer(QUESTION, NOTES)


def test_missing_region_says_how_to_set_one(no_aws):
    with pytest.raises(AnswerError, match="no AWS region set .* AWS_REGION"):
        BedrockAnswerer(MODEL)


def test_region_comes_from_aws_region(no_aws, monkeypatch):
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    answerer = BedrockAnswerer(MODEL)
    assert answerer._client.meta.region_name == "eu-central-1"


def test_unknown_profile_is_an_answer_error(no_aws):
    with pytest.raises(AnswerError, match="list-profiles"):
        BedrockAnswerer(MODEL, region="us-east-1", profile="nope")


GOLDEN_SETS = sorted((Path(__file__).resolve().parents[1] / "golden").glob("*.jsonl"))


@pytest.mark.parametrize("golden", GOLDEN_SETS, ids=[g.stem for g in GOLDEN_SETS])
def test_every_bedrock_citation_of_every_golden_question_points_into_its_context(golden, tmp_path, client):
    """Scripted Converse replies (no recorded ones can be made offline; these are in the API's real shape), one per
    golden question over the context the extract test builds: each cites a gold note under one of its headings, a
    note the context does not hold, and a heading the note does not have. Only citations into the context, with
    headings of their note and quotes from it, may come out."""
    from test_answer_extract import VAULTS, golden_contexts

    from retriever.answer.passages import passages

    if not (VAULTS / golden.stem).is_dir():
        pytest.skip(f"the shared vault {golden.stem} is not here")
    answerer = BedrockAnswerer(MODEL, client=client, answer_tokens=256, sleep=lambda s: None)
    cited = 0
    with Stubber(client) as stub:
        for q, notes in golden_contexts(golden, tmp_path):
            by_id = {n.note_id: n for n in notes}
            first = by_id.get(q["gold"][0].removesuffix(".md"), notes[0]) if q["gold"] else notes[0]
            parts = passages(first)
            said = parts[0] if parts else None
            reply = {
                "answer": said.text if said else "It is in the notes.",
                "citations": [
                    {"note_id": first.note_id, "heading": said.heading if said else ""},
                    {"note_id": "Nowhere/Invented Note", "heading": ""},  # not in the context
                    {"note_id": notes[-1].note_id, "heading": "A Heading No Note Has"},
                ],
                "not_found": False,
            }
            stub.add_response("converse", tool_response(reply))
            answer = answerer.answer(q["question"], notes)
            assert answer.citations, q["id"]
            for c in answer.citations:
                note = by_id[c.note_id]  # a KeyError is a citation outside the context
                assert c.heading in {"", *(p.heading for p in passages(note))}, (q["id"], c.ref)
                assert not c.quote or c.quote in note.text, (q["id"], c.ref)
            assert "Nowhere/Invented Note" not in {c.note_id for c in answer.citations}
            cited += len(answer.citations)
        stub.assert_no_pending_responses()
    assert cited >= 27  # every question answered with at least its first citation kept
