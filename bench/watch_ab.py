"""A/B benchmark: one saved edit under ``watch`` on a big vault, two checkouts of vault2okf taking turns in fresh
processes on the same vault, each figure with the machine's load (issue 38 part 4: "one saved edit on zettel
13.4k under watch: <= 1 s to the bundle").

    python bench/watch_ab.py --a /work/main --b . [--scale NOTES] [--rounds N] [--edits N]

Builds a synthetic vault of about NOTES notes (``convert_bench.scale_vault``) in a temp folder and converts it
once with each checkout (its own bundle: the convert cache is keyed to the code). Then, ``--rounds`` times, each
checkout in turn starts a watcher in a fresh process (``Watcher.start``: it catches up with the other side's
edits) and makes ``--edits`` text edits a moment apart, each rebuilt as a watcher rebuilds it: with the path the
file event names where that checkout's ``Watcher.rebuild`` takes paths. Per edit: the convert's seconds (to the
bundle), the rebuild's wall and CPU seconds, the old generation's removal waited before it, and the convert's
stages. The medians per checkout come last.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STAGES = ("walk", "parse", "resolve", "graph", "carry", "docs", "mentions", "report", "render", "write", "swap")


def load() -> str:
    return "load " + "/".join(f"{x:.1f}" for x in os.getloadavg())


def child(vault: Path, out: Path, edits: int, seed: int) -> None:
    """One side's turn: a watcher started, then ``edits`` text edits, a JSON line each."""
    import vault2okf.watch as watch
    from vault2okf.watch import Watcher

    results: list[object] = []
    convert = watch.convert

    def kept(*args: object, **kwargs: object) -> object:
        results.append(convert(*args, **kwargs))  # type: ignore[arg-type]
        return results[-1]

    watch.convert = kept  # type: ignore[assignment]
    takes_paths = "paths" in inspect.signature(Watcher.rebuild).parameters
    lines: list[str] = []
    vault = vault.resolve()
    w = Watcher(vault, out, echo=lines.append)
    t = time.perf_counter()
    w.start()
    print(json.dumps({"start": time.perf_counter() - t, "load": load()}), flush=True)
    notes = [n for n in sorted(vault.rglob("*.md")) if not any(p.startswith(".") for p in n.relative_to(vault).parts)]
    for i in range(edits):
        t = time.perf_counter()
        w.kept.settle()
        settle = time.perf_counter() - t
        note = notes[(seed * 7919 + i * 104729) % len(notes)]
        note.write_text(note.read_text("utf-8") + f"\nEdit {seed}.{i}: a few new words.\n", "utf-8")
        cpu, t = time.process_time(), time.perf_counter()
        ok = w.rebuild(1, [str(note)]) if takes_paths else w.rebuild(1)
        wall, cpu = time.perf_counter() - t, time.process_time() - cpu
        r = results[-1]
        stages = getattr(r, "stages", {})
        row = {"ok": ok, "bundle": getattr(r, "seconds", float("nan")), "wall": wall, "cpu": cpu, "settle": settle}
        print(json.dumps({**row, "stages": stages, "load": load(), "line": lines[-1][:160]}), flush=True)
    w.kept.settle()


def run_side(checkout: Path, args: list[str]) -> list[dict[str, object]]:
    env = {**os.environ, "PYTHONPATH": str(checkout), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", *args],
        env=env,
        cwd=checkout,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"{checkout}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--a", type=Path, default=Path("/work/main"))
    parser.add_argument("--b", type=Path, default=HERE.parent)
    parser.add_argument("--scale", type=int, default=13000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--edits", type=int, default=4)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--vault", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.child:
        child(args.vault, args.out, args.edits, args.seed)
        return
    sys.path.insert(0, str(HERE))
    from convert_bench import scale_vault

    sides = {"A": args.a.resolve(), "B": args.b.resolve()}
    print(f"# bench/watch_ab.py: {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs; {load()}", flush=True)
    for name, checkout in sides.items():
        print(f"# {name}: {checkout} ({_head(checkout)})", flush=True)
    work = Path(tempfile.mkdtemp(prefix="watch-ab-"))
    try:
        vault = scale_vault(work, args.scale)
        print(f"vault: {sum(1 for _ in vault.rglob('*.md'))} notes; {load()}", flush=True)
        for name, checkout in sides.items():
            t = time.perf_counter()
            env = {**os.environ, "PYTHONPATH": str(checkout)}
            cmd = [sys.executable, "-m", "vault2okf", "convert", str(vault), "-o", str(work / f"out-{name}")]
            subprocess.run(cmd, env=env, cwd=checkout, check=True, capture_output=True)
            print(f"{name}: full convert {time.perf_counter() - t:.1f} s; {load()}", flush=True)
        rows: dict[str, list[dict[str, object]]] = {name: [] for name in sides}
        for r in range(args.rounds):
            for name, checkout in sides.items():
                seed = 2 * r + (name == "B")
                out = work / f"out-{name}"
                got = run_side(checkout, ["--vault", str(vault), "--out", str(out), "--edits", str(args.edits),
                                          "--seed", str(seed)])  # fmt: skip
                print(f"{name} round {r}: watch start {got[0]['start']:.1f} s; {got[0]['load']}", flush=True)
                for row in got[1:]:
                    stages = row["stages"]
                    assert isinstance(stages, dict)
                    laps = " ".join(f"{k} {stages.get(k, 0):.2f}" for k in STAGES)
                    print(f"  {name}: to the bundle {row['bundle']:.2f} s, rebuild {row['wall']:.2f} s wall, "
                          f"{row['cpu']:.2f} s CPU, removal waited {row['settle']:.2f} s | {laps}; {row['load']}",
                          flush=True)  # fmt: skip
                    assert row["ok"], row["line"]
                rows[name].extend(got[1:])
        for name, got in rows.items():
            med = {k: statistics.median(float(row[k]) for row in got) for k in ("bundle", "wall", "cpu")}  # type: ignore[arg-type]
            laps = " ".join(
                f"{k} {statistics.median(float(row['stages'].get(k, 0)) for row in got):.2f}"  # type: ignore[union-attr]
                for k in STAGES
            )
            print(f"{name} medians over {len(got)} edits: to the bundle {med['bundle']:.2f} s, rebuild "
                  f"{med['wall']:.2f} s wall, {med['cpu']:.2f} s CPU | {laps}; {load()}", flush=True)  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _head(checkout: Path) -> str:
    done = subprocess.run(["git", "-C", str(checkout), "log", "-1", "--format=%h %s"], capture_output=True, text=True)
    return done.stdout.strip()[:80]


if __name__ == "__main__":
    main()
