"""Benchmark the consumer on a vault: index throughput, re-index after one edited note, retrieval latency.

    python bench/retrieval_bench.py [VAULT] [--embedder minilm] [--golden golden/thellade.jsonl]

Works on a copy of the vault in a temporary folder (the vault itself is never written). Latency is per mode,
p50/p95 over the golden questions, excluding the question embedding (measured separately), with vector-only
in the same run as the baseline.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from eval.metrics import p50_p95
from retriever.embed import get_embedder
from retriever.index import chunk_concepts, index_bundle, load_concepts
from retriever.retrieve import Budget, Mode, Retriever, SearchSpec, Seeds
from retriever.store import ChunkStore, open_client
from vault2okf.convert import convert

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "vaults" / "thellade"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("vault", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--golden", type=Path, default=ROOT / "golden" / "thellade.jsonl")
    parser.add_argument("--edit", default=None, help="vault path of the note to edit (default: the first session)")
    parser.add_argument("--bundle", type=Path, default=None, help="an indexed bundle of VAULT to start from (copied)")
    parser.add_argument("--sample", type=int, default=400, help="chunks embedded into a fresh store for throughput")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        vault, bundle = Path(tmp) / "vault", Path(tmp) / "bundle"
        shutil.copytree(args.vault, vault)
        if args.bundle:
            shutil.copytree(args.bundle, bundle)
        convert(vault, bundle)
        first = index_bundle(bundle, embedder_name=args.embedder, progress=False)
        print(f"index: {first.chunks} chunks of {first.notes} notes, {first.added} embedded in {first.seconds:.1f}s")
        _throughput(bundle, args.embedder, args.sample, Path(tmp) / "sample")
        note = vault / (args.edit or _a_session(bundle))
        note.write_text(note.read_text("utf-8") + "\nThe party rested at the inn.\n", "utf-8")
        convert(vault, bundle)
        again = index_bundle(bundle, embedder_name=args.embedder, progress=False)
        print(f"re-index after editing {note.name}: {again.seconds:.2f}s, {again.added} embedded, "
              f"{again.removed} removed, {again.unchanged} unchanged")  # fmt: skip
        _latency(bundle, args.golden)


def _throughput(bundle: Path, embedder_name: str, sample: int, path: Path) -> None:
    """Chunks/s of a fresh index (embedding + Chroma writes, model already loaded) on the first ``sample`` chunks."""
    chunks = chunk_concepts(load_concepts(bundle))[:sample]
    store = ChunkStore(open_client(bundle, path=path), "throughput")
    start = time.perf_counter()
    store.sync(chunks, get_embedder(embedder_name), progress=False)
    seconds = time.perf_counter() - start
    mean = sum(c.tokens for c in chunks) / max(len(chunks), 1)
    print(f"index throughput: {len(chunks) / seconds:.1f} chunks/s ({len(chunks)} chunks, mean {mean:.0f} tokens)")


def _a_session(bundle: Path) -> str:
    import duckdb

    con = duckdb.connect(str(bundle / "okf.duckdb"), read_only=True)
    row = con.execute("SELECT vault_path FROM concepts WHERE session_number IS NOT NULL ORDER BY 1 LIMIT 1").fetchone()
    con.close()
    return row[0] if row else "Readme.md"


def _latency(bundle: Path, golden: Path) -> None:
    retriever = Retriever.open(bundle)
    retriever.prepare(
        SearchSpec(seeds=Seeds.HYBRID)
    )  # build the default ranker's and hybrid seeds' indexes before timing
    questions = [json.loads(line)["question"] for line in golden.read_text("utf-8").splitlines() if line.strip()]
    embed_ms, rows = [], {}
    for q in questions:
        t = time.perf_counter()
        qvec = retriever.embed(q)
        embed_ms.append((time.perf_counter() - t) * 1000)
        v15 = retriever.search(q, SearchSpec(Mode.VECTOR, 15), qvec=qvec)
        budget = Budget(v15.notes, v15.tokens)
        specs = (
            ("vector@10", SearchSpec(Mode.VECTOR, 10)),
            ("vector@15", SearchSpec(Mode.VECTOR, 15)),
            ("graph@5+hop", SearchSpec(Mode.GRAPH, 5, budget=budget)),
            ("union@10+hop", SearchSpec(Mode.UNION, 10, budget=budget)),
            ("hybrid@15", SearchSpec(Mode.VECTOR, 15, Seeds.HYBRID)),
        )
        for name, spec in specs:
            r = retriever.search(q, spec, qvec=qvec)
            rows.setdefault(name, []).append(r.timings["retrieve_ms"])
    print(f"query embedding: p50 {statistics.median(embed_ms):.1f} ms over {len(questions)} questions")
    for name, values in rows.items():
        p50, p95 = p50_p95(values)
        print(f"{name:<14} p50 {p50:6.2f} ms   p95 {p95:6.2f} ms")


if __name__ == "__main__":
    main()
