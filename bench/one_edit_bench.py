"""Benchmark: what one edit costs a convert on a big vault (issue 38 part 4), by kind of edit, each figure beside
the floor of reading every note and scanning it for ``[[`` measured in the same run, with the machine's load.

    python bench/one_edit_bench.py [--scale NOTES] [--out FILE]

Builds a synthetic vault of about NOTES notes from copies of every shared vault (``convert_bench.scale_vault``)
in a temp folder, converts it in full, then edits one note at a time and converts again: a line of text, a new
alias (a name that appears), a new link (the link graph changes). Each line gives the convert's wall and CPU
seconds in this process, the stages that depend on the whole vault (mentions, graph, report, render, swap) and
how many docs were rewritten; then one text edit as a whole command (a fresh process) against a fresh process
doing the floor's work.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from convert_bench import FLOOR_CODE, floor, scale_vault  # noqa: E402

from vault2okf.convert import convert  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=int, default=13000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="one-edit-bench-"))
    try:
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
        edit(notes[len(notes) // 2], "text", 9)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", FLOOR_CODE, str(vault)], capture_output=True, check=True)
        f = time.perf_counter() - t
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "vault2okf", "convert", str(vault), "-o", str(out)], capture_output=True,
                       check=True)  # fmt: skip
        say(f"one text edit as a command: {time.perf_counter() - t:.2f} s (floor as a command {f:.2f} s); {load()}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.out:
        args.out.write_text("\n".join(LINES) + "\n", "utf-8")


if __name__ == "__main__":
    main()
