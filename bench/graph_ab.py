"""Which fp32 ONNX graph embeds faster at BGE-M3's size: fused or as traced, interleaved on the same batches.

Two single runs of bench/embedder_cost.py disagreed (fused 1.88x traced at load 4-9, traced 1.31x fused while the
load fell from 5.3 to 3.4): each arm ran once, at a different load. This runs the BGE-M3-size stand-in (random
weights, cost only: no recall figure comes from it) through both graphs in alternating order (fused, traced,
traced, fused, ...), each run a fresh process on the same groups of thellade's chunks as embedder_cost.py, and
prints each run's chunks/s beside the load and the matrix-product floor of the same run. Output:
``reports/bench-graph-ab.txt``. It uses embedder_cost.py's parts (the stand-in, the index child, the graph child,
the embed child), so the two measure the same thing.

    python bench/graph_ab.py [--runs 3] [--tiny]
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import embedder_cost as cost  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", default="thellade")
    parser.add_argument("--runs", type=int, default=3, help="runs of each graph, interleaved")
    parser.add_argument("--chunks", type=int, default=16)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--out", type=Path, default=cost.ROOT / "reports" / "bench-graph-ab.txt")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer, 64-wide stand-in: checks the script only")
    args = parser.parse_args()
    os.environ.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    sys.path.insert(0, str(cost.ROOT))
    from retriever.index import chunk_concepts, load_concepts
    from vault2okf.convert import convert

    say = cost.say
    say(f"# fused against traced at BGE-M3's size on {args.vault} (bench/graph_ab.py)")
    say(f"{os.cpu_count()} CPUs; load average before: {cost.load()}")
    for package in ("vault2okf", "retriever"):
        compileall.compile_dir(cost.ROOT / package, quiet=1)
    with tempfile.TemporaryDirectory(prefix="graph-ab-") as name:
        tmp = Path(name)
        convert(cost.VAULTS / args.vault, tmp / "whole")
        texts = sorted((c.text for c in chunk_concepts(load_concepts(tmp / "whole"))), key=len)
        cost.sub_vault(cost.VAULTS / args.vault, 1000, tmp / "sub-vault")
        convert(tmp / "sub-vault", tmp / "sub")
        standin = tmp / "standin"
        standin.mkdir()
        built = cost.run_child("build", str(standin), *(["tiny"] if args.tiny else []))
        say(f"stand-in: {built['parameters'] / 1e6:.0f} M parameters (random weights, deleted after this run)")
        spec = str(standin)
        first = tmp / "default"
        shutil.copytree(tmp / "sub", first)
        got = cost.run_child("index", str(first), spec, "fp32")
        default, other = ("fused", "traced") if got["fused"] else ("traced", "fused")
        say(f"index at fp32 with index's default: graph {default}, {got['seconds']:.0f} s")
        second = tmp / "other"
        shutil.copytree(first, second, ignore=shutil.ignore_patterns("encoder"))
        again = cost.run_child("graph", str(second), spec, other)
        if again["fused"] != (other == "fused"):
            raise SystemExit(f"the {other} export was not kept")
        say(f"the {other} export beside it: {again['seconds']:.0f} s")
        fused, traced = (first, second) if default == "fused" else (second, first)
        layers, width = (cost.TINY["num_hidden_layers"], cost.TINY["hidden_size"]) if args.tiny else (24, 1024)
        lengths_all = cost.token_counts(spec, texts, 1024)
        groups = cost.subset_groups(texts, lengths_all, args.chunks, args.group)
        texts_file = tmp / "texts.json"
        texts_file.write_text(cost.json.dumps([[texts[i] for i in g] for g in groups]), "utf-8")
        lengths = [lengths_all[i] for g in groups for i in g]
        floor_flops = cost.run_child("floor", "3")["flops_per_s"]
        floor = cost.floor_rate(lengths, layers * 12 * width * width, layers, width, floor_flops)
        say(f"subset: {len(lengths)} chunks, {sum(lengths)} tokens, in {len(groups)} calls; floor (matrix products "
            f"alone at {floor_flops / 1e9:.0f} GFLOP/s) {floor:.2f} chunks/s")  # fmt: skip
        rates: dict[str, list[float]] = {"fused": [], "traced": []}
        order = ["fused", "traced"]
        for run in range(args.runs):
            for graph in order if run % 2 == 0 else order[::-1]:
                bundle = fused if graph == "fused" else traced
                before = cost.load()
                out = cost.run_child("embed", spec, "fp32", str(bundle), str(texts_file), str(tmp / f"{graph}.npy"))
                rate = len(lengths) / out["seconds"]
                rates[graph].append(rate)
                say(f"run {run + 1} {graph:<6} {rate:6.3f} chunks/s ({rate / floor:4.0%} of the floor); session "
                    f"load {out['load_s']:.1f} s; load before {before}")  # fmt: skip
        low, high = cost.cosines(tmp / "fused.npy", tmp / "traced.npy")
        f, t = statistics.median(rates["fused"]), statistics.median(rates["traced"])
        say(f"index's default at this size: {default}")
        wins = sum(a > b for a, b in zip(rates["fused"], rates["traced"], strict=True))
        say(f"medians: fused {f:.3f}, traced {t:.3f} chunks/s: fused {f / t:.2f}x traced; fused faster in {wins} of "
            f"{args.runs} pairs; cosine fused to traced min {low:.4f} median {high:.4f}")  # fmt: skip
    say(f"load average after: {cost.load()}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(cost.LINES) + "\n", "utf-8")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
