"""The ONNX question encoder against FlagEmbedding: every golden question's vector, the default search's notes on
every indexed golden vault, and a cold ``search --json`` with and without the encoder.

    python bench/onnx_parity.py [--work out/reports-work] [--runs 5] [--out reports/onnx-parity.txt]

Vectors: MiniLM (the offline stand-in) through FlagEmbedding and through its ONNX export (written to a temporary
folder by the code `vault2okf index` runs), cosine per question. Search order: each ``WORK/<vault>`` bundle
indexed with MiniLM (scripts/make_reports.py builds them) is searched with the default spec twice, once with
questions from its encoder and once from FlagEmbedding; the notes must be the same, in the same order. Cold
search: ``vault2okf search BUNDLE QUESTION --json`` as fresh processes, alternating the ONNX path with the
FlagEmbedding path (the bundle's encoder moved aside), medians of ``--runs`` each, beside the import floor
``python -c "import onnxruntime, tokenizers, numpy"`` measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from retriever.embed import embedder_fingerprint, get_embedder  # noqa: E402
from retriever.encoder import QuestionEmbedder, encoder_dir, load_encoder  # noqa: E402
from retriever.export import export_encoder  # noqa: E402
from retriever.graph import load_graph  # noqa: E402
from retriever.index import lexical_path, open_table, read_index_info  # noqa: E402
from retriever.retrieve import DEFAULT_SPEC, Retriever  # noqa: E402

GOLDEN = ROOT / "golden"
LINES: list[str] = []


def say(line: str = "") -> None:
    print(line, flush=True)
    LINES.append(line)


def questions(vault: str) -> list[str]:
    rows = (GOLDEN / f"{vault}.jsonl").read_text("utf-8").splitlines()
    return [json.loads(row)["question"] for row in rows if row.strip()]


def vectors(vaults: list[str]) -> None:
    flag = get_embedder("minilm")
    with tempfile.TemporaryDirectory() as tmp:
        export_encoder(tmp, flag, embedder_fingerprint("minilm") or "")
        encoder, notice = load_encoder(tmp, "minilm", "minilm")
        if encoder is None:
            raise SystemExit(notice)
        say("## Question vectors: ONNX export vs FlagEmbedding (MiniLM), cosine")
        say(f"{'set':<18} {'questions':>9} {'min':>12} {'median':>12}")
        everything = []
        for vault in vaults:
            cos = [float(encoder.embed(q) @ flag.embed_query(q)) for q in questions(vault)]
            everything += cos
            say(f"{vault:<18} {len(cos):>9} {min(cos):>12.9f} {statistics.median(cos):>12.9f}")
        say(f"{'all':<18} {len(everything):>9} {min(everything):>12.9f} {statistics.median(everything):>12.9f}")
        say(f"every cosine >= 0.9999: {'yes' if min(everything) >= 0.9999 else 'NO'}")


def search_order(vaults: list[str], work: Path) -> list[Path]:
    say("\n## Default search: notes and their order, ONNX questions vs FlagEmbedding questions")
    flag = get_embedder("minilm")
    checked = []
    for vault in vaults:
        bundle = work / vault
        try:
            embedder = read_index_info(bundle).embedder
        except Exception as error:  # not built or not indexed: said, not fatal
            say(f"{vault:<18} not checked ({error})")
            continue
        onnx = Retriever.open(bundle)
        if embedder != "minilm" or not isinstance(onnx.embedder, QuestionEmbedder):
            say(f"{vault:<18} not checked (embedder {embedder}; {' '.join(onnx.notices) or 'no ONNX encoder'})")
            continue
        info, table, _ = open_table(bundle)
        graph = load_graph(bundle)
        ref = Retriever(bundle, None, flag, graph, table, lexical_path(bundle, info.collection))
        differ = [
            q
            for q in questions(vault)
            if [h.note_id for h in onnx.search(q, DEFAULT_SPEC).hits]
            != [h.note_id for h in ref.search(q, DEFAULT_SPEC).hits]
        ]
        same = "yes" if not differ else f"NO ({len(differ)} differ: {differ[0]!r} ...)"
        say(f"{vault:<18} {len(questions(vault)):>3} questions, same notes in the same order: {same}")
        checked.append(bundle)
    return checked


def cold(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    return time.perf_counter() - start


def cold_search(bundle: Path, runs: int) -> None:
    exe = [sys.executable, "-m", "vault2okf"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    question = questions(bundle.name)[0]
    search = [*exe, "search", str(bundle), question, "--json"]
    floor = [sys.executable, "-c", "import onnxruntime, tokenizers, numpy"]
    folder = encoder_dir(bundle)
    aside = folder.with_name("encoder.bench-aside")
    times: dict[str, list[float]] = {"onnx": [], "flag": [], "floor": []}
    say(f"\n## Cold `vault2okf search {bundle.name} QUESTION --json`, whole process, {runs} runs each, alternating")
    say(f"load before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    cold(search, env)  # warm the page cache for both paths
    try:
        for _ in range(runs):
            times["floor"].append(cold(floor, env))
            times["onnx"].append(cold(search, env))
            os.replace(folder, aside)
            try:
                times["flag"].append(cold(search, env))
            finally:
                os.replace(aside, folder)
    finally:
        if aside.exists() and not folder.exists():
            os.replace(aside, folder)
    say(f"load after: {os.getloadavg()[0]:.2f}")
    for label, key in (("FlagEmbedding (before, encoder removed)", "flag"), ("ONNX encoder (after)", "onnx"),
                       ("floor: import onnxruntime, tokenizers, numpy", "floor")):  # fmt: skip
        runs_s = " ".join(f"{t:.2f}" for t in times[key])
        say(f"{label:<46} median {statistics.median(times[key]):5.2f} s   ({runs_s})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=ROOT / "out" / "reports-work")
    parser.add_argument("--runs", type=int, default=5)
    timing = "The WORK bundles the cold search runs on (of those the search-order check passed)."
    parser.add_argument("--timing-bundles", nargs="+", default=["children-of-ash", "thellade"], help=timing)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "onnx-parity.txt")
    args = parser.parse_args()
    vaults = sorted(p.stem for p in GOLDEN.glob("*.jsonl"))
    say("# ONNX question encoder vs FlagEmbedding (bench/onnx_parity.py)")
    vectors(vaults)
    checked = search_order(vaults, args.work)
    for name in args.timing_bundles if args.runs else ():
        if args.work / name in checked:
            cold_search(args.work / name, args.runs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(LINES) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
