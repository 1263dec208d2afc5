"""Benchmark: what one edited note costs `index` (issue 38: one saved edit to the MiniLM index in 2 s), as an A/B of
two checkouts' code in the same run, with the machine's load beside each figure.

    python bench/index_edit_bench.py BUNDLE VAULT [--code DIR ...] [--rounds R] [--edits K] [--kinds K,..] [--out FILE]
    python bench/index_edit_bench.py --build DIR --scale NOTES

``--build`` makes BUNDLE and VAULT for a big vault without hours of embedding: a vault of about NOTES notes
(copies of every shared vault, ``convert_bench.scale_vault``) in DIR, converted, then indexed by `index_bundle`
through the MiniLM embedder's own code path (its ONNX export written and loaded, the Chroma collection, the saved
table and BM25 files) except that the first bulk's document vectors come from a cheap stand-in (a hashed
bag-of-words projected to MiniLM's 384 dimensions, unit length): they are NOT MiniLM's vectors. Every edit timed
afterwards is embedded by the real MiniLM encoder; what an edit's index costs does not depend on the values of
the vectors already stored. The report's header says so (``--stand-in`` line).

BUNDLE is an indexed MiniLM bundle of VAULT (neither is touched: both are copied to a temp folder for each run).
Each ``--code`` (a checkout: default this one) runs in a fresh process with that checkout first on ``PYTHONPATH``,
the checkouts taking turns, R rounds: the process indexes its copy and one edited note (untimed: the encoder loads,
Chroma opens, a file another version wrote is written again, as at the start of ``watch --index``), then K times
edits one note (``--kinds``: a line of text, a new alias, a new note, a deleted note, in turn), converts (untimed:
the convert side's cost is bench/one_edit_bench.py's) and times
``index_bundle`` in-process, as ``watch --index`` calls it: wall and CPU seconds, the load. The floor beside each:
embedding every chunk of the edited note with the same encoder, in the same process (an index embeds only the
chunks whose text changed, often one, so it can come in under this floor: a big note's chunks cost more than the
rest of its index).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
LINES: list[str] = []


def say(line: str) -> None:
    print(line, flush=True)
    LINES.append(line)


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


KINDS = ("text", "alias", "add", "delete")


def edit(vault: Path, note: Path, kind: str, i: int) -> Path | None:
    """One edit of ``kind`` to (or beside) ``note``; the note whose chunks it embeds (None: a deleted note)."""
    if kind == "delete":
        note.unlink()
        return None
    if kind == "add":
        new = note.with_name(f"Bench note {i}.md")
        new.write_text(
            f"# Bench note {i}\n\nThe lanterns of the harbour were lit again, said [[{note.stem}]].\n", "utf-8"
        )
        return new
    text = note.read_text("utf-8")
    if kind == "alias":
        body = text.split("---\n", 2)[-1] if text.startswith("---\n") else text
        note.write_text(f"---\naliases: [Bench Alias {i}]\n---\n{body}", "utf-8")
    else:
        note.write_text(text + f"\nEdit {i}: the lanterns of the harbour were lit again.\n", "utf-8")
    return note


def child(bundle: Path, vault: Path, edits: int, kinds: list[str]) -> None:
    """In the checkout under test: a warm index, then ``edits`` timed indexes of one edit each (JSON lines)."""
    from retriever.export import index_embedder
    from retriever.index import chunk_concepts, index_bundle, load_concepts
    from vault2okf.convert import convert

    convert(vault, bundle)
    index_bundle(bundle, embedder_name="minilm", progress=False)
    embedder, _ = index_embedder(bundle, "minilm")
    notes = sorted(vault.rglob("*.md"))
    for i in range(edits + 1):  # the first (untimed) opens Chroma, as the first index of `watch --index` did
        kind = "text" if not i else kinds[(i - 1) % len(kinds)]
        note = edit(vault, notes[i * len(notes) // (edits + 1)], kind, i)
        convert(vault, bundle)
        cpu, wall = time.process_time(), time.perf_counter()
        result = index_bundle(bundle, embedder_name="minilm", progress=False)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if not i:
            continue
        edited = [] if note is None else [note.relative_to(vault).with_suffix("").as_posix()]  # its concept id
        texts = [chunk.text for chunk in chunk_concepts(load_concepts(bundle, edited))] if edited else []
        floor = time.perf_counter()
        if texts:
            embedder.embed_documents(texts)
        floor = time.perf_counter() - floor
        line = {"wall": wall, "cpu": cpu, "floor": floor, "added": result.added, "removed": result.removed}
        line["kind"] = kind
        print("RESULT " + json.dumps({**line, "chunks": result.chunks, "notes": result.notes, "load": load()}))


def run(code: Path, bundle: Path, vault: Path, edits: int, kinds: str, work: Path) -> list[dict[str, object]]:
    """One round for one checkout: fresh copies, a fresh process."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(bundle, work / "bundle", symlinks=True)
    shutil.copytree(vault, work / "vault", symlinks=True)
    env = {**os.environ, "PYTHONPATH": str(code), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    script = [sys.executable, str(Path(__file__).resolve()), "--child", str(work / "bundle"), str(work / "vault")]
    done = subprocess.run(
        [*script, "--edits", str(edits), "--kinds", kinds], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"{code}: {done.stderr[-2000:]}")
    shutil.rmtree(work, ignore_errors=True)
    return [json.loads(line[7:]) for line in done.stdout.splitlines() if line.startswith("RESULT ")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bundle", type=Path, nargs="?")
    parser.add_argument("vault", type=Path, nargs="?")
    parser.add_argument("--code", type=Path, action="append", help="a checkout to measure (repeat for an A/B)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--edits", type=int, default=3)
    parser.add_argument("--kinds", default="text", help=f"edits to take turns, of {','.join(KINDS)}")
    parser.add_argument("--build", type=Path, help="make a big vault and its first index here (see above)")
    parser.add_argument("--scale", type=int, default=13000, help="with --build: about this many notes")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    if any(kind not in KINDS for kind in kinds):
        parser.error(f"--kinds {args.kinds}: each of {', '.join(KINDS)}")
    if args.build:
        build(args.build, args.scale)
        return
    if args.child:
        child(args.bundle, args.vault, args.edits, kinds)
        return
    if args.bundle is None or args.vault is None:
        parser.error("give BUNDLE and VAULT (or --build DIR)")
    stand_in = args.bundle / ".vault2okf" / "stand-in.txt"
    codes = [c.resolve() for c in args.code or [HERE]]
    notes = sum(1 for _ in args.vault.rglob("*.md"))
    say(f"# bench/index_edit_bench.py: {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs; load {load()}")
    if stand_in.is_file():
        say(f"--stand-in: {stand_in.read_text('utf-8').strip()}")
    say(f"vault {args.vault.name}: {notes} notes; {args.edits} edits a round ({args.kinds} in turn), {args.rounds} "
        "rounds, the checkouts in turn")  # fmt: skip
    found: dict[Path, list[dict[str, object]]] = {code: [] for code in codes}
    with tempfile.TemporaryDirectory(prefix="index-edit-bench-") as tmp:
        for r in range(args.rounds):
            for code in codes:
                for result in run(code, args.bundle, args.vault, args.edits, args.kinds, Path(tmp) / "work"):
                    found[code].append(result)
                    say(
                        f"round {r + 1}, {code}: one {result['kind']} edit's index {result['wall']:.2f} s wall, "
                        f"{result['cpu']:.2f} s CPU (floor {result['floor']:.2f} s); {result['added']} embedded, "
                        f"{result['removed']} removed, {result['chunks']} chunks; load {result['load']}"
                    )
    for code, results in found.items():
        walls, cpus = [float(r["wall"]) for r in results], [float(r["cpu"]) for r in results]  # type: ignore[arg-type]
        floors = [float(r["floor"]) for r in results]  # type: ignore[arg-type]
        say(
            f"median, {code}: {statistics.median(walls):.2f} s wall ({min(walls):.2f}-{max(walls):.2f}), "
            f"{statistics.median(cpus):.2f} s CPU ({min(cpus):.2f}-{max(cpus):.2f}); floor "
            f"{statistics.median(floors):.2f} s; load {load()}"
        )
    if args.out:
        args.out.write_text("\n".join(LINES) + "\n", "utf-8")


STAND_IN = (
    "the first index's {chunks} document vectors are a stand-in (a hashed bag of words projected to {dim} "
    "dimensions), not MiniLM's; the index was built by index_bundle through MiniLM's ONNX path otherwise; every "
    "timed edit is embedded by the real MiniLM encoder"
)


class BagOfWords:
    """The stand-in for the first bulk only (``--build``): MiniLM's embedder with its document vectors replaced by a
    hashed bag of words times a fixed random projection, unit length (near texts get near vectors, as a real
    encoder's do, so Chroma's graph is of a like shape)."""

    BUCKETS = 1 << 14

    def __init__(self, real: object) -> None:
        import numpy as np

        self.real = real
        self.name, self.spec = real.name, real.spec  # type: ignore[attr-defined]
        self.dim, self.batch_size = real.dim, 256  # type: ignore[attr-defined]
        self.projection = np.random.default_rng(38).standard_normal((self.BUCKETS, self.dim)).astype(np.float32)
        self.chunks = 0

    def embed_documents(self, texts: list[str]) -> object:
        import re
        import zlib

        import numpy as np

        counts = np.zeros((len(texts), self.BUCKETS), dtype=np.float32)
        for row, text in enumerate(texts):
            found = [zlib.crc32(w.encode()) % self.BUCKETS for w in re.findall(r"\w\w+", text.lower())]
            counts[row] = np.bincount(np.array(found, dtype=np.int64), minlength=self.BUCKETS)
        vectors = counts @ self.projection
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
        self.chunks += len(texts)
        return vectors

    def embed_query(self, text: str) -> object:
        return self.real.embed_query(text)  # type: ignore[attr-defined]


def build(root: Path, scale: int) -> None:
    """``--build``: a vault of about ``scale`` notes in ``root``, converted, and its first index (the stand-in's
    vectors for that bulk alone: ``BagOfWords``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from convert_bench import scale_vault

    import retriever.export as export
    from retriever.index import index_bundle
    from vault2okf.convert import convert

    real = export.index_embedder
    made: list[BagOfWords] = []

    def stand_in(*args: object, **kwargs: object) -> object:
        embedder, notice = real(*args, **kwargs)  # type: ignore[arg-type]
        made.append(BagOfWords(embedder))
        return made[-1], notice

    started = time.perf_counter()
    vault = scale_vault(root, scale)
    bundle = root / "bundle"
    convert(vault, bundle)
    notes = sum(1 for _ in vault.rglob("*.md"))
    say(f"vault {vault}: {notes} notes, converted in {time.perf_counter() - started:.0f} s; load {load()}")
    export.index_embedder = stand_in  # type: ignore[assignment]
    started = time.perf_counter()
    result = index_bundle(bundle, embedder_name="minilm", progress=False)
    export.index_embedder = real
    say(f"first index: {result.chunks} chunks in {time.perf_counter() - started:.0f} s; load {load()}")
    line = STAND_IN.format(chunks=made[0].chunks, dim=made[0].dim)
    (bundle / ".vault2okf" / "stand-in.txt").write_text(line + "\n", "utf-8")
    say(line)


if __name__ == "__main__":
    main()
