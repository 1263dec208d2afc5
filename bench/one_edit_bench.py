"""Benchmark: what one edit costs a convert on a big vault (issue 38 part 4), by kind of edit, each figure beside
the floor of reading every note and scanning it for ``[[`` measured in the same run, with the machine's load.

    python bench/one_edit_bench.py [--scale NOTES] [--index-scale NOTES] [--memory EDITS] [--out FILE]

Builds a synthetic vault of about NOTES notes from copies of every shared vault (``convert_bench.scale_vault``)
in a temp folder, converts it in full, then edits one note at a time and converts again: a line of text, a new
alias (a name that appears), a new link (the link graph changes). Each line gives the convert's wall and CPU
seconds in this process, the stages that depend on the whole vault (mentions, graph, report, render, swap) and
how many docs were rewritten; then three text edits, each as a whole command (a fresh process) against a fresh
process doing the floor's work, and their median.

Then the same vault under ``watch`` (``vault2okf.watch.Watcher``, its state kept in memory between edits): one
saved edit of each kind (the rebuild told the path its file event names, as under ``watch``), to the bundle (the
convert, swap included) and to the rebuild's line, edits a moment apart (the last generation's removal, done on a
thread meanwhile, is waited for first, and timed apart). To the
MiniLM index on a smaller scale vault (``--index-scale``, indexed first: an index of the big one takes hours on
two cores). ``--memory EDITS``: a small vault's watcher after that many saved edits, its resident memory at
checkpoints (edits alternate two versions of one note, so the vault itself does not grow).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from convert_bench import FLOOR_CODE, floor, scale_vault  # noqa: E402

from vault2okf.convert import convert  # noqa: E402
from vault2okf.watch import Watcher  # noqa: E402

LINES: list[str] = []


def say(line: str) -> None:
    print(line, flush=True)
    LINES.append(line)


def load() -> str:
    return "load " + "/".join(f"{x:.1f}" for x in os.getloadavg())


def edit(note: Path, kind: str, n: int) -> None:
    text = note.read_text("utf-8")
    if kind == "alias":
        text = f"---\naliases: [Bench Alias {n}]\n---\n" + text.split("---\n")[-1]
    elif kind == "link":
        text += f"\nSee [[{note.parent.name}]] too.\n"
    else:
        text += f"\nEdit {n}: a few new words.\n"
    note.write_text(text, "utf-8")


def rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def seconds_in(line: str, what: str) -> float:
    found = re.search(rf"{what} (\d+\.\d+)s", line)
    return float(found.group(1)) if found else float("nan")


def watched(vault: Path, out: Path, kinds: list[str], indexer: object = None) -> None:
    """One saved edit of each kind under a watcher that keeps its state: a line each, then the medians."""
    lines: list[str] = []
    options = {"embedder_name": "minilm"} if indexer else None
    w = Watcher(vault, out, echo=lines.append, indexer=indexer, index_options=options)  # type: ignore[arg-type]
    t = time.perf_counter()
    w.start()
    say(f"watch start ({'convert and index' if indexer else 'convert'}): {time.perf_counter() - t:.1f} s; {load()}")
    notes = sorted(vault.rglob("*.md"))
    walls, bundles, cpus = [], [], []
    for i, kind in enumerate(kinds):
        t = time.perf_counter()
        w.kept.settle()  # the last generation's removal, on a thread since the last rebuild
        settle = time.perf_counter() - t
        note = notes[(i + 2) * len(notes) // (len(kinds) + 3)]
        edit(note, kind, 100 + i)
        f = floor(vault)
        cpu, t = time.process_time(), time.perf_counter()
        w.rebuild(1, [str(note.resolve())])  # the path its file event names
        wall, cpu = time.perf_counter() - t, time.process_time() - cpu
        bundle, index = seconds_in(lines[-1], "convert"), seconds_in(lines[-1], "index")
        walls.append(wall), bundles.append(bundle), cpus.append(cpu)
        to_index = f", index {index:.2f} s" if indexer else ""
        say(
            f"watch, one {kind} edit: to the bundle {bundle:.2f} s{to_index}, rebuild in all {wall:.2f} s wall, "
            f"{cpu:.2f} s CPU (floor {f:.2f} s); old generation's removal waited {settle:.2f} s; {load()}"
        )
    what = "to the index" if indexer else "to the bundle"
    say(f"watch medians: {what} {statistics.median(walls if indexer else bundles):.2f} s wall, rebuild "
        f"{statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} s CPU; {load()}")  # fmt: skip
    w.kept.settle()


def memory(work: Path, edits: int) -> None:
    vault = scale_vault(work, 1)  # the smallest shared vault, once
    out = work / "memory-bundle"
    note = sorted(vault.rglob("*.md"))[0]
    versions = [note.read_text("utf-8"), note.read_text("utf-8") + "\nOne more line.\n"]
    w = Watcher(vault, out, echo=lambda _line: None)
    w.start()
    marks = {10, 100, edits // 4, edits // 2, edits}
    shown = []
    for i in range(1, edits + 1):
        note.write_text(versions[i % 2], "utf-8")
        w.rebuild(1)
        if i in marks:
            w.kept.settle()
            shown.append(f"{i}: {rss_mib():.1f}")
    notes = len(list(vault.rglob("*.md")))
    say(f"watch memory, {notes}-note vault, resident MiB after N saved edits: {', '.join(shown)}; {load()}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=int, default=13000)
    parser.add_argument("--index-scale", type=int, default=500)
    parser.add_argument("--memory", type=int, default=0, help="saved edits for the memory figure (0: none)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="one-edit-bench-"))
    say(f"# bench/one_edit_bench.py: {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs; {load()}")
    try:
        if args.memory:
            memory(work / "memory", args.memory)
        if not args.scale:
            return
        vault = scale_vault(work, args.scale)
        out = work / "bundle"
        notes = sorted(vault.rglob("*.md"))
        start = time.perf_counter()
        convert(vault, out)
        say(
            f"vault: {len(notes)} notes (copies of the shared vaults); full convert {time.perf_counter() - start:.1f} s"
        )
        for i, kind in enumerate(["text", "text", "alias", "link"]):
            edit(notes[(i + 1) * len(notes) // 6], kind, i)
            f = floor(vault)
            cpu = time.process_time()
            r = convert(vault, out)
            cpu = time.process_time() - cpu
            st = {k: r.stages.get(k, 0.0) for k in ("mentions", "graph", "report", "render", "swap")}
            stages = ", ".join(f"{k} {v:.2f}" for k, v in st.items())
            say(f"one {kind} edit: {r.seconds:.2f} s wall, {cpu:.2f} s CPU here (floor {f:.2f} s); {stages}; "
                f"{r.notes - r.reused} docs rewritten; {load()}")  # fmt: skip
        commands = []
        for n in range(3):  # a fresh process each, the floor's command just before it
            edit(notes[len(notes) // 2 + n], "text", 9 + n)
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", FLOOR_CODE, str(vault)], capture_output=True, check=True)
            f = time.perf_counter() - t
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "vault2okf", "convert", str(vault), "-o", str(out)],
                           capture_output=True, check=True)  # fmt: skip
            commands.append(time.perf_counter() - t)
            say(f"one text edit as a command: {commands[-1]:.2f} s (floor as a command {f:.2f} s); {load()}")
        say(f"one text edit as a command, median of {len(commands)}: {statistics.median(commands):.2f} s")
        watched(vault, out, ["text", "text", "text", "alias", "link"])
        if args.index_scale:
            from retriever.index import index_bundle

            small = scale_vault(work / "index", args.index_scale)
            watched(small, work / "index-bundle", ["text", "text", "text"], index_bundle)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if args.out:
            args.out.write_text("\n".join(LINES) + "\n", "utf-8")


if __name__ == "__main__":
    main()
