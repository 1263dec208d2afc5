"""Peak memory of writing the fused export (`retriever.export.fuse_in_child`) against the traced export and the
fusion run in the exporting process (how it ran before), on a random BGE-M3-vocabulary checkpoint of a chosen
depth and width (bench/embedder_cost.py's stand-in builder). Each way runs in its own fresh process; peak RSS is
VmHWM from /proc, the fusion child's read as it exits. Cost only: random weights, no recall.

    PYTHONPATH=. python bench/fusion_memory.py --layers 12 --hidden 768
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
# The fusion child, wrapped so that it writes its own VmHWM to the file named by FUSION_PEAK_FILE as it exits.
CHILD = (
    "import os, re, runpy, sys; from pathlib import Path\n"
    "sys.argv = ['retriever.export', 'fuse', *sys.argv[1:]]\n"
    "try:\n    runpy.run_module('retriever.export', run_name='__main__', alter_sys=True)\n"
    "finally:\n    Path(os.environ['FUSION_PEAK_FILE']).write_text("
    "re.search(r'VmHWM:\\s+(\\d+)', Path('/proc/self/status').read_text()).group(1))\n"
)


def peak_mb() -> float:
    return int(re.search(r"VmHWM:\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) / 1024  # type: ignore[union-attr]


def child(way: str, spec: str, bundle: str, peak_file: str) -> dict[str, object]:
    from retriever.embed import get_embedder
    from retriever.export import _network, _probe, export_encoder, fuse

    flag = get_embedder(spec)
    started = time.perf_counter()
    if way == "child":
        import retriever.export

        os.environ["FUSION_PEAK_FILE"] = peak_file
        retriever.export._fuse_command = lambda arguments: [sys.executable, "-c", CHILD, *arguments]  # type: ignore[attr-defined]
        folder = export_encoder(bundle, flag, "fingerprint", fusion=True)
    else:
        folder = export_encoder(bundle, flag, "fingerprint", fusion=False)
        if way == "in-process":  # the fusion beside torch's model, as export_encoder(fusion=True) ran it before
            network, pooling = _network(flag.model)  # type: ignore[attr-defined]
            config = network.config
            fuse(folder, config.num_attention_heads, config.hidden_size, pooling, _probe(flag.model.tokenizer))  # type: ignore[attr-defined]
    import onnx

    graph = onnx.load(str(folder / "model.onnx"), load_external_data=False).graph
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    fused = any(node.op_type == "Attention" for node in graph.node)
    return {"seconds": time.perf_counter() - started, "rss_mb": peak_mb(), "fused": fused, "bytes": size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--ways", default="traced,child,in-process")
    args = parser.parse_args()
    spec_ = importlib.util.spec_from_file_location("embedder_cost", ROOT / "bench" / "embedder_cost.py")
    assert spec_ is not None and spec_.loader is not None
    bench = importlib.util.module_from_spec(spec_)
    sys.modules["embedder_cost"] = bench
    spec_.loader.exec_module(bench)
    with tempfile.TemporaryDirectory(prefix="fusion-memory-") as tmp:
        standin = Path(tmp) / "standin"
        standin.mkdir()
        heads = args.hidden // 64
        bench.TINY = {"num_hidden_layers": args.layers, "hidden_size": args.hidden, "num_attention_heads": heads,
                      "intermediate_size": 4 * args.hidden}  # fmt: skip
        built = bench.build_standin(standin, tiny=True)
        print(f"stand-in {args.layers} layers x {args.hidden}, {built['parameters'] / 1e6:.0f}M parameters, "
              f"vocabulary {built['vocab']}; load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        for way in args.ways.split(","):
            peak_file = Path(tmp) / f"{way}.peak"
            out = subprocess.run(
                [sys.executable, __file__, "--child", way, str(standin), str(Path(tmp) / way), str(peak_file)],
                env=ENV, capture_output=True, text=True, check=True,
            )  # fmt: skip
            got = json.loads(out.stdout.strip().splitlines()[-1])
            child_mb = int(peak_file.read_text()) / 1024 if peak_file.exists() else 0.0
            print(f"{way:>10}: {got['seconds']:.1f} s, exporting process peak {got['rss_mb']:.0f} MB, fusion child "
                  f"peak {child_mb:.0f} MB, fused {got['fused']}, on disk {got['bytes'] / 1e6:.0f} MB; load "
                  f"{os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(child(*sys.argv[2:6])))
    else:
        main()
