"""Benchmark: what one edited note costs `index` (issue 38: one saved edit to the MiniLM index in 2 s), as an A/B of
two checkouts' code in the same run, with the machine's load beside each figure.

    python bench/index_edit_bench.py BUNDLE VAULT [--code DIR ...] [--rounds R] [--edits K] [--out FILE]

BUNDLE is an indexed MiniLM bundle of VAULT (neither is touched: both are copied to a temp folder for each run).
Each ``--code`` (a checkout: default this one) runs in a fresh process with that checkout first on ``PYTHONPATH``,
the checkouts taking turns, R rounds: the process indexes its copy and one edited note (untimed: the encoder loads,
Chroma opens, a file another version wrote is written again, as at the start of ``watch --index``), then K times
edits one note's text, converts (untimed: the convert side's cost is bench/one_edit_bench.py's) and times
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


def child(bundle: Path, vault: Path, edits: int) -> None:
    """In the checkout under test: a warm index, then ``edits`` timed indexes of one edited note each (JSON lines)."""
    from retriever.export import index_embedder
    from retriever.index import chunk_concepts, index_bundle, load_concepts
    from vault2okf.convert import convert

    convert(vault, bundle)
    index_bundle(bundle, embedder_name="minilm", progress=False)
    embedder, _ = index_embedder(bundle, "minilm")
    notes = sorted(vault.rglob("*.md"))
    for i in range(edits + 1):  # the first (untimed) opens Chroma, as the first index of `watch --index` did
        note = notes[i * len(notes) // (edits + 1)]
        note.write_text(note.read_text("utf-8") + f"\nEdit {i}: the lanterns of the harbour were lit again.\n", "utf-8")
        convert(vault, bundle)
        cpu, wall = time.process_time(), time.perf_counter()
        result = index_bundle(bundle, embedder_name="minilm", progress=False)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if not i:
            continue
        edited = note.relative_to(vault).with_suffix("").as_posix()  # its concept id
        texts = [chunk.text for chunk in chunk_concepts([c for c in load_concepts(bundle) if c[0] == edited])]
        floor = time.perf_counter()
        embedder.embed_documents(texts)
        floor = time.perf_counter() - floor
        line = {"wall": wall, "cpu": cpu, "floor": floor, "added": result.added, "removed": result.removed}
        print("RESULT " + json.dumps({**line, "chunks": result.chunks, "notes": result.notes, "load": load()}))


def run(code: Path, bundle: Path, vault: Path, edits: int, work: Path) -> list[dict[str, object]]:
    """One round for one checkout: fresh copies, a fresh process."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(bundle, work / "bundle", symlinks=True)
    shutil.copytree(vault, work / "vault", symlinks=True)
    env = {**os.environ, "PYTHONPATH": str(code), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    script = [sys.executable, str(Path(__file__).resolve()), "--child", str(work / "bundle"), str(work / "vault")]
    done = subprocess.run([*script, "--edits", str(edits)], env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{code}: {done.stderr[-2000:]}")
    shutil.rmtree(work, ignore_errors=True)
    return [json.loads(line[7:]) for line in done.stdout.splitlines() if line.startswith("RESULT ")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bundle", type=Path)
    parser.add_argument("vault", type=Path)
    parser.add_argument("--code", type=Path, action="append", help="a checkout to measure (repeat for an A/B)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--edits", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.child:
        child(args.bundle, args.vault, args.edits)
        return
    codes = [c.resolve() for c in args.code or [HERE]]
    notes = sum(1 for _ in args.vault.rglob("*.md"))
    say(f"# bench/index_edit_bench.py: {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs; load {load()}")
    say(f"vault {args.vault.name}: {notes} notes; {args.edits} edited notes a round, {args.rounds} rounds, in turn")
    found: dict[Path, list[dict[str, object]]] = {code: [] for code in codes}
    with tempfile.TemporaryDirectory(prefix="index-edit-bench-") as tmp:
        for r in range(args.rounds):
            for code in codes:
                for result in run(code, args.bundle, args.vault, args.edits, Path(tmp) / "work"):
                    found[code].append(result)
                    say(
                        f"round {r + 1}, {code}: one edit's index {result['wall']:.2f} s wall, {result['cpu']:.2f} s "
                        f"CPU (floor {result['floor']:.2f} s); {result['added']} embedded, {result['removed']} "
                        f"removed, {result['chunks']} chunks; load {result['load']}"
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


if __name__ == "__main__":
    main()
