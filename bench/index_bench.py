"""Benchmark `index` against the raw FlagEmbedding encode of the same chunks, in the same run.

    nice -n 10 python bench/index_bench.py [--vault thellade] [--every 8] [--runs 3] [--out reports/bench-index.txt]

A sub-vault (every Nth note of VAULT, copied to a temp folder) is converted once. Then, per run (medians over
``--runs``; the parts alternate order each run so drift from the machine's load hits both):
- floor: ``FlagModel.encode(all chunk texts, batch_size=B)``, one call, the embedder's batch size B: what
  FlagEmbedding does with these chunks at its best;
- ours: ``Embedder.embed_documents`` in the store's write batches, as `index` calls it;
- the whole `index_bundle` into a fresh Chroma folder (chunking, embedding, Chroma writes, the table copy).
Around them: chunking, tokenising, the padding each batching costs, and Chroma writes of ready vectors alone.
Throughput is real (unpadded) tokens per second, tokens as the model's tokenizer counts them after truncation.
The load average is printed before and after, because on a shared machine it moves every number.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VAULTS = ROOT.parent / "shared" / "vaults"
LINES: list[str] = []


def say(line: str = "") -> None:
    print(line, flush=True)
    LINES.append(line)


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def sub_vault(vault: Path, every: int, into: Path) -> int:
    notes = sorted(p for p in vault.rglob("*.md") if not any(part.startswith(".") for part in p.parts))
    picked = notes[::every]
    for path in picked:
        target = into / path.relative_to(vault)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return len(picked)


def padded_tokens(lengths: list[int], batch: int) -> int:
    """Tokens the model computes when ``lengths`` (in this order) are cut into batches padded to their longest."""
    return sum(max(lengths[i : i + batch]) * len(lengths[i : i + batch]) for i in range(0, len(lengths), batch))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vault", default="thellade")
    parser.add_argument("--every", type=int, default=8, help="take every Nth note of the vault")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-index.txt")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    from retriever.embed import get_embedder
    from retriever.index import _batch_from_env, chunk_concepts, index_bundle, load_concepts
    from retriever.store import ChunkStore, open_client
    from vault2okf.convert import convert

    say(f"# index throughput, {args.vault} (every {args.every}th note), MiniLM on CPU, {os.cpu_count()} cores")
    say(f"load average before: {load()}")
    with tempfile.TemporaryDirectory(prefix="index-bench-") as tmp:
        vault, bundle = Path(tmp) / args.vault, Path(tmp) / "bundle"
        notes = sub_vault(VAULTS / args.vault, args.every, vault)
        convert(vault, bundle)
        concepts = load_concepts(bundle)
        t_chunk, chunks = timed(lambda: chunk_concepts(concepts))
        texts = [c.text for c in chunks]

        t_load, embedder = timed(lambda: get_embedder("minilm"))
        model = embedder.model  # type: ignore[attr-defined]
        tokenizer = model.tokenizer
        max_length = embedder.max_length  # type: ignore[attr-defined]
        t_tok, encoded = timed(lambda: tokenizer(texts, truncation=True, max_length=max_length)["input_ids"])
        lengths = [len(ids) for ids in encoded]
        real = sum(lengths)
        b = embedder.batch_size
        store_batch = _batch_from_env()
        by_length = sorted(lengths)
        say(f"sub-vault: {notes} notes -> {len(chunks)} chunks, {real} tokens (MiniLM tokenizer, max {max_length})")
        say(f"model load: {t_load:.1f} s (once per process; not in the figures below)")
        say(f"chunking: {t_chunk * 1000:.0f} ms; tokenising every chunk once: {t_tok * 1000:.0f} ms")
        say(
            f"padding at batch {b}: in note order {padded_tokens(lengths, b) / real:.2f}x the real tokens, "
            f"sorted by length {padded_tokens(by_length, b) / real:.2f}x"
        )

        def floor() -> Any:
            return model.encode(texts, batch_size=b, max_length=max_length)

        def ours() -> Any:
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # as ChunkStore.sync orders them
            todo = [texts[i] for i in order]
            for start in range(0, len(todo), store_batch):
                embedder.embed_documents(todo[start : start + store_batch])

        def before() -> Any:  # the path before this bench: FlagModel.encode per batch (its OOM probe each time)
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
            todo = [texts[i] for i in order]
            for start in range(0, len(todo), b):
                embedder._encode(todo[start : start + b])  # type: ignore[attr-defined]

        fresh = iter(range(10_000))

        def whole() -> Any:
            chroma = Path(tmp) / f"chroma-{next(fresh)}"
            return index_bundle(bundle, embedder_name="minilm", chroma_path=chroma, progress=False)

        floor()  # warm up: first calls pay one-off allocations
        results: dict[str, list[float]] = {"floor": [], "ours": [], "before": [], "index": []}
        for run in range(args.runs):
            parts: list[tuple[str, Callable[[], Any]]] = [
                ("floor", floor),
                ("ours", ours),
                ("before", before),
                ("index", whole),
            ]
            for name, fn in parts if run % 2 == 0 else parts[::-1]:
                results[name].append(timed(fn)[0])

        vectors = embedder.embed_documents(texts)
        client = open_client(bundle, path=Path(tmp) / "chroma-write")
        store = ChunkStore(client, "bench")

        def chroma_writes() -> None:
            for start in range(0, len(chunks), store_batch):
                part = chunks[start : start + store_batch]
                store.collection.upsert(
                    ids=[c.chunk_id for c in part],
                    embeddings=vectors[start : start + store_batch].tolist(),
                    documents=[c.text for c in part],
                    metadatas=[{"note_id": c.note_id} for c in part],
                )

        t_write, _ = timed(chroma_writes)

    f, o, old, w = (statistics.median(results[k]) for k in ("floor", "ours", "before", "index"))
    n = len(texts)
    say(f"runs: {args.runs} (medians); embed batch {b}, store write batch {store_batch}")
    say(f"floor, raw FlagModel.encode, one call:  {f:6.1f} s {real / f:6.0f} tokens/s {n / f:5.1f} chunks/s")
    say(f"ours, embed_documents as index calls it: {o:6.1f} s {real / o:6.0f} tokens/s = {f / o:.0%} of the floor")
    say(f"before, FlagModel.encode per batch:     {old:6.1f} s {real / old:6.0f} tokens/s = {f / old:.0%} of the floor")
    say(f"whole index_bundle (fresh Chroma):      {w:6.1f} s {real / w:6.0f} tokens/s = {f / w:.0%} of the floor")
    say(f"Chroma writes of ready vectors alone: {t_write:.2f} s ({t_write / w:.0%} of the whole index)")
    say(
        f"per 1,000 chunks (MiniLM, here): floor {f / n * 1000:.0f} s, ours {o / n * 1000:.0f} s, "
        f"index {w / n * 1000:.0f} s"
    )
    say("all runs (s): " + "; ".join(f"{k} " + ", ".join(f"{x:.1f}" for x in v) for k, v in results.items()))
    say(f"load average after: {load()}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(LINES) + "\n", "utf-8")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
