"""`vault2okf serve` as a subprocess on a shared-vault bundle (MiniLM index, `--llm extract`), driven over real
HTTP: every endpoint of docs/API.md, the errors, the Host/Origin checks, the token, and 32 clients at once."""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from serve_checks import Server, cli, serving, without_timings

pytestmark = pytest.mark.slow
QUESTION = "What is the Virelian Civil War?"
HIT_FIELDS = {"note_id", "title", "heading", "score", "via", "seed", "snippet", "doc_path", "vault_path",
              "obsidian_uri", "tokens"}  # fmt: skip


@pytest.fixture(scope="module")
def server(coa_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    errlog = tmp_path_factory.mktemp("serve-log") / "stderr.txt"
    with serving([coa_bundle], "--llm", "extract", errlog=errlog) as running:
        yield running


def test_health_names_the_bundle_its_index_and_generation(server: Server, coa_bundle: Path) -> None:
    health = server.get("/health")
    assert health["status"] == "ok" and health["version"] == "0.1.0"
    (bundle,) = health["bundles"]
    assert bundle["name"] == "children-of-ash" and bundle["path"] == str(coa_bundle.resolve())
    assert bundle["vault"] == "children-of-ash" and bundle["index"] == "ready"
    assert bundle["notes"] == 38 and bundle["chunks"] > bundle["notes"]
    assert bundle["converted_at"].startswith("20")
    left = json.loads((coa_bundle / ".vault2okf" / "serve.json").read_text())
    assert left["generation"] == bundle["generation"] and left["pid"] == server.process.pid
    assert left["port"] == int(server.url.rsplit(":", 1)[1])
    assert health["models"] == {"embedder": "minilm", "answerer": "extract"}


def test_search_gives_the_in_process_hits_with_seeds_snippets_and_uris(server: Server, coa_bundle: Path) -> None:
    from retriever.retrieve import DEFAULT_SPEC, Retriever

    found = server.post("/search", {"question": QUESTION})
    expected = Retriever.open(coa_bundle).search(QUESTION, DEFAULT_SPEC)
    assert [(h["note_id"], h["score"], h["via"]) for h in found["hits"]] == [
        (h.note_id, h.score, str(h.via)) for h in expected.hits
    ]
    assert found["bundle"] == "children-of-ash" and found["mode"] == "union" and found["k"] == 10
    assert found["notes"] == len(found["hits"]) and found["tokens"] == sum(h["tokens"] for h in found["hits"])
    graph = Retriever.open(coa_bundle).graph
    for hit in found["hits"]:
        assert set(hit) >= HIT_FIELDS and len(hit["snippet"]) <= 301
        assert hit["obsidian_uri"] == "obsidian://open?vault=children-of-ash&file=" + quote(
            hit["vault_path"].removesuffix(".md"), safe=""
        )
        if hit["via"] == "vector":
            assert hit["seed"] is None
    hops = [h for h in found["hits"] if h["via"] == "hop" and h["seed"]]
    assert hops, "the default search hops from its seeds on this question"
    seeds = {h["note_id"] for h in found["hits"] if h["via"] == "vector"}
    for hop in hops:  # the seed named is a vector hit that links the note (either way) or is its adjacent session
        assert hop["seed"] in seeds
        assert hop["note_id"] in graph.neighbours.get(hop["seed"], {}) or hop["note_id"] in graph.adjacent_sessions(
            hop["seed"]
        )
    vector_only = server.post("/search", {"question": QUESTION, "mode": "vector", "k": 3})
    assert [h["via"] for h in vector_only["hits"]] == ["vector"] * len(vector_only["hits"]) and vector_only["k"] == 3


def test_filters_limit_the_search_as_in_process(server: Server, coa_bundle: Path) -> None:
    from dataclasses import replace

    from retriever.filters import NoteFilter
    from retriever.retrieve import DEFAULT_SPEC, Retriever

    body = {"question": QUESTION, "filters": {"type": ["NPC"], "folder": ["NPCs"]}}
    found = server.post("/search", body)
    spec = replace(DEFAULT_SPEC, filters=NoteFilter.from_json(body["filters"]))
    expected = Retriever.open(coa_bundle).search(QUESTION, spec)
    assert [(h["note_id"], h["score"]) for h in found["hits"]] == [(h.note_id, h.score) for h in expected.hits]
    assert found["hits"] and all(h["vault_path"].startswith("NPCs/") for h in found["hits"])
    for hit in found["hits"][:3]:
        assert server.get("/notes/" + quote(hit["note_id"]))["type"] == "NPC"
    unfiltered = server.post("/search", {"question": QUESTION})
    assert any(not h["vault_path"].startswith("NPCs/") for h in unfiltered["hits"])
    asked = server.post("/ask", body)
    assert all(h["vault_path"].startswith("NPCs/") for h in asked["retrieved"])


def test_ask_json_is_the_ask_json_of_the_cli(server: Server, coa_bundle: Path) -> None:
    over_http = server.post("/ask", {"question": QUESTION})
    done = cli("ask", str(coa_bundle), QUESTION, "--llm", "extract", "--json")
    assert done.returncode == 0, done.stderr
    in_process = json.loads(done.stdout)
    assert without_timings(over_http) == without_timings(in_process)
    assert over_http["citations"] and not over_http["not_found"]


def test_ask_streams_sources_then_tokens_then_done(server: Server) -> None:
    events = server.events({"question": QUESTION})
    kinds = [e for e, _ in events]
    assert kinds[0] == "sources" and kinds[-1] == "done" and set(kinds[1:-1]) <= {"token"}
    assert "token" in kinds
    searched = server.post("/search", {"question": QUESTION})
    assert without_timings(events[0][1]["hits"]) == without_timings(searched["hits"])
    done = events[-1][1]
    assert "".join(d["text"] for e, d in events if e == "token") == done["answer"]
    assert without_timings(done) == without_timings(server.post("/ask", {"question": QUESTION}))


def test_a_note_rendered_with_anchors_and_links_both_ways(server: Server) -> None:
    note = server.get("/notes/" + quote("Sessions/Session 10"))
    assert note["note_id"] == "Sessions/Session 10" and note["vault_path"] == "Sessions/Session 10.md"
    assert note["obsidian_uri"] == "obsidian://open?vault=children-of-ash&file=Sessions%2FSession%2010"
    assert '<h2 id="details" data-heading="Details">' in note["html"] or 'data-heading="Details"' in note["html"]
    assert "<script" not in note["html"]
    assert note["text"] and not note["text"].startswith("---")
    outs = {n["note_id"] for n in note["links_out"]}
    assert outs and all(n["vault_path"].endswith(".md") for n in note["links_out"])
    for target in list(outs)[:3]:  # each note it links lists it among its links in
        back = server.get("/notes/" + quote(target))
        assert "Sessions/Session 10" in {n["note_id"] for n in back["links_in"]}
    status, _, body = server.request("/notes/" + quote("No Such/Note"))
    assert status == 404 and "no note" in body["error"]


def test_block_anchors_become_ids(server: Server, coa_bundle: Path) -> None:
    docs = [p for p in (coa_bundle / "concepts").rglob("*.md") if '<a id="' in p.read_text()]
    if not docs:
        pytest.skip("this vault has no block ids")
    doc = docs[0].relative_to(coa_bundle / "concepts").with_suffix("")
    note = server.get("/notes/" + quote(str(doc)))
    assert 'class="block-anchor"' in note["html"] and "&lt;a id=" not in note["html"]


def test_related_notes_say_why(server: Server) -> None:
    related = server.get("/related/" + quote("NPCs/Vann Solis") + "?k=5")
    assert related["note_id"] == "NPCs/Vann Solis" and 0 < len(related["related"]) <= 5
    assert all(r["note_id"] != "NPCs/Vann Solis" and r["why"] for r in related["related"])
    ashfall = next(r for r in related["related"] if r["note_id"] == "Factions/PMC/Ashfall")
    assert "linked from here" in ashfall["why"]


def test_links_is_the_link_health_report_and_one_notes_part(server: Server, coa_bundle: Path) -> None:
    report = json.loads((coa_bundle / "link-health.json").read_text())
    assert server.get("/links") == report
    broken = report["broken"][0]
    source = broken["at"][0].rsplit(":", 1)[0]
    mine = server.get("/links?note=" + quote(source))
    assert mine["broken"] and all(a.startswith(source + ":") for e in mine["broken"] for a in e["at"])
    assert server.get("/links?note=" + quote("Nowhere.md"))["broken"] == []
    # the unlinked mentions too: only the note's own entry, its counts recounted
    first = report["mentions"]["by_note"][0]
    own = server.get("/links?note=" + quote(first["note"]))["mentions"]
    assert own["by_note"] == [first] and (own["notes"], own["total"]) == (1, first["count"])
    assert server.get("/links?note=" + quote("Nowhere.md"))["mentions"]["by_note"] == []


def test_openapi_names_exactly_the_routes_served(server: Server) -> None:
    doc = server.get("/openapi.json")
    assert doc["openapi"].startswith("3.")
    served = {(path, method) for path, ops in doc["paths"].items() for method in ops}
    from retriever.serve.app import WEB

    routes = {("/health", "get"), ("/search", "post"), ("/ask", "post"), ("/notes/{note_id}", "get"),
              ("/related/{note_id}", "get"), ("/links", "get"), ("/openapi.json", "get"),
              *((p, "get") for p in WEB), ("/mcp", "post"), ("/mcp", "get"), ("/mcp", "delete")}  # fmt: skip
    assert served == routes
    for path, method in served:  # each is answered (not 404/405) where the document says
        if path == "/mcp":
            continue
        concrete = path.replace("{note_id}", quote("NPCs/Vann Solis"))
        body = {"question": QUESTION} if method == "post" else None
        status, _, _ = server.request(concrete, body, method=method.upper())
        assert status == 200, (path, method, status)
    for path, body, schema in (("/health", None, "HEALTH"), ("/search", {"question": QUESTION}, "SEARCH")):
        _, _, got = server.request(path, body)
        ref = doc["paths"][path]["get" if body is None else "post"]["responses"]["200"]["content"]
        assert set(ref["application/json"]["schema"]["required"]) <= set(got), schema
    assert server.request("/health", method="PUT")[0] == 405


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"question": ""}, 400, "missing or empty"),
        ({"question": "x" * 2001}, 400, "at most 2000"),
        ({"question": "q", "k": 0}, 400, '"k"'),
        ({"question": "q", "mode": "sideways"}, 400, "unknown mode"),
        ({"question": "q", "ranker": "nope"}, 400, "unknown ranker"),
        ({"question": "q", "colour": "red"}, 400, "unknown field 'colour'"),
        ({"question": "q", "bundle": "other"}, 404, "no bundle 'other'"),
        ({"question": "q", "filters": {"since": "yesterday"}}, 400, "YYYY-MM-DD"),
        ({"question": "q", "filters": {"flavour": ["x"]}}, 400, "unknown filter"),
        ({"question": "q", "filters": {"since": "2025-01-02", "until": "2024-01-01"}}, 400, "is after until"),
        ([1, 2], 400, "JSON object"),
    ],
)
def test_bad_requests_are_one_json_error(server: Server, body: Any, status: int, says: str) -> None:
    for path in ("/search", "/ask"):
        got, headers, error = server.request(path, body)
        assert got == status and says in error["error"], (path, error)
        assert set(error) == {"error"} and "Traceback" not in error["error"]


def test_bodies_are_capped_and_not_json_is_an_error(server: Server) -> None:
    status, _, error = server.request("/search", raw=b'{"question": "' + b"a" * 70_000 + b'"}')
    assert status == 413 and "over" in error["error"]
    status, _, error = server.request("/search", raw=b"{not json")
    assert status == 400 and "not JSON" in error["error"]
    status, _, error = server.request("/nowhere")
    assert status == 404 and error == {"error": "Not Found"}


def test_undecodable_mcp_requests_get_a_json_rpc_error_and_the_server_goes_on(server: Server) -> None:
    """MCP over HTTP: bytes that are not UTF-8, a lone surrogate, a cut-off request and a deeply nested one are each
    a JSON-RPC error (or the body cap), never a traceback or a dead server (as `mcp_stdio` does for stdio)."""
    accept = {"Accept": "application/json, text/event-stream"}
    client = {"name": "t", "version": "1"}
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    status, headers, _ = server.request("/mcp", hello, headers=accept)
    session = {k.lower(): v for k, v in headers.items()}.get("mcp-session-id")
    assert status == 200 and session
    call = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search","arguments":{"query":"%s"}}}'
    for raw in (call % b"\xff\xfe", call % b"\\ud800", b'{"jsonrpc":"2.0","id":4,"meth', b"[" * 30_000 + b"]" * 30_000):
        status, _, reply = server.request("/mcp", raw=raw, headers={**accept, "mcp-session-id": session})
        assert status == 400 and reply["error"]["code"] == -32700, (raw[:40], reply)
    assert server.get("/health")["status"] == "ok"
    assert "Traceback" not in server.errlog.read_text()


def test_other_hosts_and_origins_are_refused(server: Server) -> None:
    port = server.url.rsplit(":", 1)[1]
    for headers in ({"Host": "evil.example"}, {"Host": f"evil.example:{port}"}, {"Host": "127.0.0.1:1"},
                    {"Origin": "http://evil.example"}, {"Origin": f"http://evil.example:{port}"}):  # fmt: skip
        for path, body in (("/health", None), ("/search", {"question": QUESTION}), ("/mcp", {})):
            status, _, error = server.request(path, body, headers=headers)
            assert status == 403 and "DNS rebinding" in error["error"], (headers, path)
    assert server.request("/health", headers={"Host": f"localhost:{port}"})[0] == 200
    status, headers, _ = server.request("/health", headers={"Origin": "app://obsidian.md"})
    assert status == 200 and headers.get("access-control-allow-origin") == "app://obsidian.md"
    pre = {"Origin": "app://obsidian.md", "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "authorization, content-type"}  # fmt: skip
    status, headers, _ = server.request("/search", headers=pre, method="OPTIONS")
    assert status == 204 and "Authorization" in headers["access-control-allow-headers"]


def test_off_loopback_needs_a_token(coa_bundle: Path) -> None:
    done = cli("serve", str(coa_bundle), "--host", "0.0.0.0", "--port", "0", "--llm", "extract")
    assert done.returncode == 1 and done.stderr.startswith("Error: --host 0.0.0.0 is not a loopback address")
    assert len(done.stderr.strip().splitlines()) == 1
    done = cli("serve", str(coa_bundle), "--allow-host", "vault.example.org", "--port", "0", "--llm", "extract")
    assert done.returncode == 1 and done.stderr.startswith("Error: --allow-host vault.example.org lets requests")


def test_a_token_is_required_of_every_request(coa_bundle: Path, tmp_path: Path) -> None:
    options = ["--llm", "extract", "--token", "s3cret", "--allow-host", "vault.example.org"]
    with serving([coa_bundle], *options, errlog=tmp_path / "err.txt") as server:
        for path in ("/health", "/links", "/mcp"):
            for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
                status, _, error = server.request(path, headers=auth)
                assert status == 401 and error == {"error": "missing or wrong token"}, (path, auth)
        assert server.get("/health", headers={"Authorization": "Bearer s3cret"})["status"] == "ok"
        for host in ("vault.example.org", "vault.example.org:443"):  # a tunnel's or proxy's name: any port
            assert server.get("/health", headers={"Authorization": "Bearer s3cret", "Host": host})["status"] == "ok"
        status, _, _ = server.request("/health", headers={"Authorization": "Bearer s3cret", "Host": "other.org"})
        assert status == 403
        state = coa_bundle / ".vault2okf"
        assert "s3cret" not in (state / "serve.json").read_text()
        assert (state / "serve-token").read_text() == "s3cret"
        assert stat.S_IMODE(os.stat(state / "serve-token").st_mode) == 0o600
    assert not (state / "serve.json").exists() and not (state / "serve-token").exists()


def test_32_clients_at_once_get_the_answers_they_get_alone(server: Server) -> None:
    questions = ["What is the Virelian Civil War?", "Who commands the Ashfall PMC?", "What is Ironveil?",
                 "Who is Nini Shoju?", "What happened in Session 2?", "Where is Virelia?",
                 "What is the Ashfall Incident?", "Who is Dmitri Solis?"]  # fmt: skip
    alone = {q: (without_timings(server.post("/search", {"question": q})),
                 without_timings(server.post("/ask", {"question": q}))) for q in questions}  # fmt: skip
    got: dict[int, Any] = {}
    barrier = threading.Barrier(32)

    def client(i: int) -> None:
        q = questions[i % len(questions)]
        barrier.wait()
        try:
            got[i] = (q, without_timings(server.post("/search", {"question": q})),
                      without_timings(server.post("/ask", {"question": q})))  # fmt: skip
        except Exception as e:  # noqa: BLE001 - recorded, asserted below
            got[i] = (q, e, None)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 32
    for q, searched, asked in got.values():
        assert (searched, asked) == alone[q], q


def test_a_client_leaving_mid_stream_costs_the_server_nothing(server: Server) -> None:
    import http.client

    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    for _ in range(5):
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        conn.request("POST", "/ask", json.dumps({"question": QUESTION}),
                     {"Accept": "text/event-stream", "Content-Type": "application/json"})  # fmt: skip
        response = conn.getresponse()
        assert response.readline().startswith(b"event: sources")
        conn.close()  # gone after the first event
    assert server.get("/health")["status"] == "ok"
    assert server.events({"question": QUESTION})[-1][0] == "done"
    assert "Traceback" not in server.errlog.read_text()


def test_search_explains_a_note_as_in_process(server: Server, coa_bundle: Path) -> None:
    from retriever.explain import explain
    from retriever.retrieve import DEFAULT_SPEC, Retriever

    found = server.post("/search", {"question": QUESTION, "k": 2, "explain": "Ashfall"})
    spec = replace(DEFAULT_SPEC, k=2)
    assert found["explain"] == explain(Retriever.open(coa_bundle), QUESTION, spec, "Ashfall").to_json()
    assert "explain" not in server.post("/search", {"question": QUESTION})
    status, _, body = server.request("/search", {"question": QUESTION, "explain": "No Such Note"})
    assert status == 400 and "no note 'No Such Note' in the bundle" in body["error"]
