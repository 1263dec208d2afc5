"""Benchmark: convert a vault, against the floor of just reading every file and regex-scanning it for ``[[``.

    python bench/convert_bench.py [VAULT] [--repeat N]

Both are measured in the same run, warm page cache, median of N. Prints the ratio, stage times and peak memory.
"""

from __future__ import annotations

import argparse
import re
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from vault2okf.convert import convert

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "vaults" / "thellade"
_WIKILINK = re.compile(rb"\[\[")


def floor(vault: Path) -> tuple[float, int]:
    start = time.perf_counter()
    count = 0
    for path in vault.rglob("*.md"):
        count += len(_WIKILINK.findall(path.read_bytes()))
    return time.perf_counter() - start, count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("vault", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    floor(args.vault)  # warm the page cache
    floors, converts, stages = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            floors.append(floor(args.vault)[0])
            result = convert(args.vault, Path(tmp) / "bundle")
            converts.append(result.seconds)
            stages.append(result.stages)
    f, c = statistics.median(floors), statistics.median(converts)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"vault: {args.vault.name}  notes: {result.notes}  links: {result.links}  runs: {args.repeat}")
    print(f"floor (read + scan for [[): {f * 1000:.0f} ms")
    print(f"convert:                     {c * 1000:.0f} ms  = {c / f:.1f}x the floor")
    for name in stages[0]:
        print(f"  {name:<8} {statistics.median(s[name] for s in stages) * 1000:7.0f} ms")
    print(f"peak RSS: {peak_mib:.0f} MiB")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
