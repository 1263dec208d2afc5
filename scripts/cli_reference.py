#!/usr/bin/env python3
"""Write docs/cli.md, the command reference, from the commands' own ``--help``.

Usage:
    python scripts/cli_reference.py            # write docs/cli.md
    python scripts/cli_reference.py --check    # exit 1 (and say so) when docs/cli.md differs from the --help now
    python scripts/cli_reference.py --out FILE # another file (with --check: compare against FILE)

Each command's help is what ``vault2okf COMMAND --help`` prints at 80 columns, run in this process through click's
test runner, so the reference cannot drift from the code: ``tests/test_docs.py`` fails when docs/cli.md differs
from what this script writes now.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from typer.testing import CliRunner  # noqa: E402

from vault2okf.cli import COMMANDS, app  # noqa: E402

DOC = ROOT / "docs" / "cli.md"
WIDTH = 80
HEAD = """# Command reference

Every command's `--help`, as `vault2okf COMMAND --help` prints it (80 columns). **Generated**: run
`python scripts/cli_reference.py` after changing an option; `tests/test_docs.py` fails when this file differs
from the commands' help. How to use them: [the README](../README.md); the options listed under "Retrieval
experiments": [search.md](search.md).
"""


def help_of(*command: str) -> str:
    """What ``vault2okf COMMAND --help`` prints, at ``WIDTH`` columns."""
    result = CliRunner().invoke(app, [*command, "--help"], prog_name="vault2okf", terminal_width=WIDTH)
    if result.exit_code != 0:
        raise SystemExit(f"vault2okf {' '.join(command)} --help failed (exit {result.exit_code}):\n{result.output}")
    return result.stdout.rstrip() + "\n"


def render() -> str:
    """docs/cli.md's text: the global options, a contents line, then one section per command of ``COMMANDS``."""
    names = list(COMMANDS)
    contents = " · ".join(f"[{name}](#vault2okf-{name})" for name in names)
    parts = [HEAD, f"Commands: {contents}\n", "## vault2okf\n", f"```text\n{help_of()}```\n"]
    for name in names:
        parts += [f"## vault2okf {name}\n", f"```text\n{help_of(name)}```\n"]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file differs from the --help now")
    parser.add_argument("--out", type=Path, default=DOC, help="the reference file (default: docs/cli.md)")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text("utf-8") if args.out.is_file() else ""
        if current != text:
            print(f"{args.out} differs from the commands' --help: run python scripts/cli_reference.py", file=sys.stderr)
            return 1
        print(f"{args.out} matches the commands' --help")
        return 0
    args.out.write_text(text, "utf-8")
    print(f"wrote {args.out} ({len(text.splitlines())} lines, {len(COMMANDS)} commands)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
