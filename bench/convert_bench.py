"""Benchmark: convert a vault in full, again with nothing changed, and after one edited note, each against the
floor of just reading every file and regex-scanning it for ``[[``, measured in the same run.

    python bench/convert_bench.py [VAULT] [--repeat N] [--scale NOTES] [--out FILE]

The vault is copied to a temp folder first (the edits go there; the shared vault is never touched). Each
figure is the median of N runs, warm page cache, in-process and as a whole command (a fresh ``vault2okf
convert`` process against a fresh ``python`` process doing the floor's work). ``--scale NOTES`` instead
builds a synthetic vault of about NOTES notes from copies of every shared vault (each copy in its own folder,
so names repeat: links become ambiguous, as in a big vault) and measures it the same way, with each
command's peak memory.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from vault2okf.convert import ConvertResult, convert
from vault2okf.workers import workers

VAULTS = Path(__file__).resolve().parents[2] / "shared" / "vaults"
DEFAULT = VAULTS / "thellade"
_WIKILINK = re.compile(rb"\[\[")
FLOOR_CODE = (
    "import re,sys,pathlib;p=re.compile(rb'\\[\\[');"
    "print(sum(len(p.findall(f.read_bytes())) for f in pathlib.Path(sys.argv[1]).rglob('*.md')))"
)
CLI = [sys.executable, "-c", "from vault2okf.cli import app; app()"]
LINES: list[str] = []


def say(line: str = "") -> None:
    print(line, flush=True)
    LINES.append(line)


def floor(vault: Path) -> float:
    start = time.perf_counter()
    for path in vault.rglob("*.md"):
        len(_WIKILINK.findall(path.read_bytes()))
    return time.perf_counter() - start


# Runs a command as its child and writes its wall seconds, peak RSS (KiB) and exit code to argv[1]. The child of a
# small process: a process forked from this big one starts with this one's RSS high-water mark, which its exec
# keeps in its rusage.
TIMER_CODE = (
    "import os,sys,time,subprocess;t=time.perf_counter();p=subprocess.Popen(sys.argv[2:]);"
    "_,s,u=os.wait4(p.pid,0);p.returncode=0;w=time.perf_counter()-t;"
    "open(sys.argv[1],'w').write(f'{w} {u.ru_maxrss} {os.waitstatus_to_exitcode(s)}')"
)


def command(args: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one fresh process, its own workers included (``wait4`` gives the
    largest of the process and the children it waited for)."""
    with tempfile.TemporaryDirectory() as tmp:
        result, log = Path(tmp) / "result", Path(tmp) / "log"
        with log.open("wb") as out:
            subprocess.run([sys.executable, "-c", TIMER_CODE, str(result), *args], stdout=out, stderr=out, check=False)
        wall, kib, code = result.read_text().split()
        if int(code):
            raise SystemExit(f"{' '.join(args)} failed:\n{log.read_text(errors='replace')}")
    return float(wall), int(kib) / 1024


def edit(vault: Path, run: int) -> Callable[[], None]:
    notes = sorted(vault.rglob("*.md"))
    note = notes[len(notes) // 2]
    original = note.read_text("utf-8")

    def change() -> None:
        note.write_text(original + f"\nEdit {run}: see [[{note.stem}]].\n", "utf-8")

    return change


def measure(vault: Path, repeat: int, memory: bool) -> None:
    work = Path(tempfile.mkdtemp(prefix="convert-bench-"))
    try:
        copy = work / "vault"
        if vault != copy:
            shutil.copytree(vault, copy, symlinks=True)
        out, full_out = work / "bundle", work / "full"
        floor(copy)  # warm the page cache
        floors, fulls, single, same, edited, reused = [], [], [], [], [], []
        result: ConvertResult | None = None
        convert(copy, out)
        for run in range(repeat):
            floors.append(floor(copy))
            shutil.rmtree(full_out, ignore_errors=True)
            fulls.append(convert(copy, full_out, full=True).seconds)
            shutil.rmtree(full_out, ignore_errors=True)
            with one_process():
                single.append(convert(copy, full_out, full=True).seconds)
            result = convert(copy, out)
            assert result.unchanged
            same.append(result.seconds)
            edit(copy, run)()
            time.sleep(0.01)
            changed = convert(copy, out)
            edited.append(changed.seconds)
            reused.append(changed.reused)
        assert result is not None
        f = statistics.median(floors)
        say(f"vault: {vault.name}  notes: {result.notes}  links: {result.links}  runs: {repeat}")
        say(f"floor (read + scan for [[):  {f * 1000:7.0f} ms")
        say(f"workers: {workers()[0]} (VAULT2OKF_WORKERS to change)")
        against_floor(f, 28, ("full convert", fulls), ("full convert, one process", single),
                      ("nothing changed", same), ("one note edited", edited))  # fmt: skip
        say(f"  (one note edited: {statistics.median(reused):.0f} of {result.notes} notes carried unchanged)")
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        say(f"in-process peak RSS: {rss:.0f} MiB (this process, all its converts; the workers' below)")
        whole(copy, out, full_out, repeat, memory)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextmanager
def one_process() -> Iterator[None]:
    """The convert without its workers (``VAULT2OKF_WORKERS=1``): what they gain, in the same run."""
    was = os.environ.get("VAULT2OKF_WORKERS")
    os.environ["VAULT2OKF_WORKERS"] = "1"
    try:
        yield
    finally:
        if was is None:
            del os.environ["VAULT2OKF_WORKERS"]
        else:
            os.environ["VAULT2OKF_WORKERS"] = was


def against_floor(floor_s: float, width: int, *rows: tuple[str, list[float]]) -> None:
    """One line per figure: its median and how many times the floor it is."""
    for name, times in rows:
        t = statistics.median(times)
        say(f"{name + ':':<{width}} {t * 1000:7.0f} ms = {t / floor_s:5.1f}x the floor")


def whole(vault: Path, out: Path, full_out: Path, repeat: int, memory: bool) -> None:
    """Whole commands: what a user waits for, start-up included."""
    floors, fulls, same, edited, rss = [], [], [], [], {}
    for run in range(repeat):
        floors.append(command([sys.executable, "-c", FLOOR_CODE, str(vault)])[0])
        shutil.rmtree(full_out, ignore_errors=True)
        wall, rss["full"] = command([*CLI, "convert", str(vault), "-o", str(full_out), "--full"])
        fulls.append(wall)
        wall, rss["same"] = command([*CLI, "convert", str(vault), "-o", str(out)])
        same.append(wall)
        edit(vault, repeat + run)()
        wall, rss["edit"] = command([*CLI, "convert", str(vault), "-o", str(out)])
        edited.append(wall)
    f = statistics.median(floors)
    say(f"whole commands (fresh processes, medians of {repeat}):")
    say(f"floor `python -c <read + scan>`: {f * 1000:7.0f} ms")
    against_floor(f, 31, ("convert --full", fulls), ("convert, nothing changed", same), ("convert, one edit", edited))
    if memory:  # each command's own peak, its workers included (the last run's)
        peaks = ", ".join(f"{name} {mib:.0f} MiB" for name, mib in rss.items())
        say(f"peak RSS per command, workers included: {peaks}")


def scale_vault(root: Path, notes: int) -> Path:
    """About ``notes`` notes: whole copies of the shared vaults, each in its own folder, until there are enough."""
    vault = root / f"scale-{notes}"
    count, copy = 0, 0
    sources = sorted(p for p in VAULTS.iterdir() if p.is_dir())
    while count < notes:
        copy += 1
        for source in sources:
            if count >= notes:
                break
            shutil.copytree(source, vault / f"copy{copy}" / source.name, symlinks=True)
            count += sum(1 for _ in source.rglob("*.md"))
    return vault


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("vault", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scale", type=int, default=0, help="build a synthetic vault of about this many notes")
    parser.add_argument("--out", type=Path, help="also write the lines to this file")
    args = parser.parse_args()
    one, five, _ = os.getloadavg()
    when = time.strftime("%Y-%m-%d %H:%M")
    say(f"# bench/convert_bench.py — {when}, {os.cpu_count()} CPUs, load {one:.2f} (5 min {five:.2f})")
    if args.scale:
        with tempfile.TemporaryDirectory(prefix="scale-") as tmp:
            vault = scale_vault(Path(tmp), args.scale)
            measure(vault, args.repeat, memory=True)
    else:
        measure(args.vault.resolve(), args.repeat, memory=False)
    one, five, _ = os.getloadavg()
    say(f"end load {one:.2f} (5 min {five:.2f})")
    if args.out:
        args.out.write_text("\n".join(LINES) + "\n", "utf-8")


if __name__ == "__main__":
    main()
