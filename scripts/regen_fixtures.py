"""Regenerate ``tests/fixtures/<scenario>/expected/`` from ``input/``, the way tests/test_fixtures.py converts.

Usage: python scripts/regen_fixtures.py [SCENARIO ...]

With no names it regenerates every scenario except those marked xfail in tests/test_fixtures.py: their
expected/ was corrected by hand to what the converter should emit once the bug is fixed. Name one to
overwrite it anyway (do that after the fix, and check the diff is only the hand correction going away).

Review every changed expected file by hand before committing: the fixtures say what a user wants, not
merely what the converter emits today.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_fixtures import COMPARED, FIXTURES, XFAIL, convert_fixture, scenarios, tree  # noqa: E402


def regen(scenario: str) -> int:
    with tempfile.TemporaryDirectory() as work:
        files = tree(convert_fixture(scenario, Path(work)), COMPARED)
    expected = FIXTURES / scenario / "expected"
    shutil.rmtree(expected, ignore_errors=True)
    for rel, data in files.items():
        (expected / rel).parent.mkdir(parents=True, exist_ok=True)
        (expected / rel).write_bytes(data)
    return len(files)


def main(argv: list[str]) -> int:
    known = scenarios()
    unknown = [s for s in argv if s not in known]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    for scenario in argv or known:
        if not argv and scenario in XFAIL:
            print(f"{scenario}: skipped (xfail, hand-corrected expected; name it to overwrite)")
            continue
        print(f"{scenario}: {regen(scenario)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
