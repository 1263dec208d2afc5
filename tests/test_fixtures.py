"""Whole-tree golden fixtures: ``tests/fixtures/<scenario>/input/`` converts to ``expected/``.

``expected/`` holds the bundle's ``concepts/`` tree and ``link-health.json``; regenerate it with
``python scripts/regen_fixtures.py [SCENARIO...]`` and review every changed file by hand.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
from pathlib import Path

import pytest
from bundle_checks import dangling_links, tree_hashes

from vault2okf.convert import convert

FIXTURES = Path(__file__).parent / "fixtures"
MTIME = 1_700_000_000  # every input file gets this mtime, so timestamps taken from mtimes are stable
COMPARED = ("concepts", "link-health.json")
# scenario -> reason, while a converter bug is open (each bug has its own small scenario)
XFAIL: dict[str, str] = {}
LINKS_XFAIL: dict[str, str] = {}
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def scenarios() -> list[str]:
    return sorted(p.name for p in FIXTURES.iterdir() if (p / "input").is_dir())


def params(xfail: dict[str, str]) -> list:
    return [
        pytest.param(s, marks=[pytest.mark.xfail(strict=True, reason=xfail[s])] if s in xfail else [])
        for s in scenarios()
    ]


def convert_fixture(scenario: str, work: Path) -> Path:
    """Copy the input byte-exact to ``work/<scenario>``, pin every mtime, convert into ``work/out``."""
    vault = work / scenario
    shutil.copytree(FIXTURES / scenario / "input", vault, symlinks=True)
    for path in [vault, *vault.rglob("*")]:
        os.utime(path, (MTIME, MTIME), follow_symlinks=False)
    convert(vault, work / "out")
    return work / "out"


def tree(root: Path, names: tuple[str, ...] = ("",)) -> dict[str, bytes]:
    """Relative path -> bytes for every file under ``root/name`` for each name."""
    files: dict[str, bytes] = {}
    for name in names:
        top = root / name
        for path in [top] if top.is_file() else sorted(top.rglob("*")):
            if path.is_file():
                files[path.relative_to(root).as_posix()] = path.read_bytes()
    return files


@pytest.mark.parametrize("scenario", params(XFAIL))
def test_golden(scenario: str, tmp_path: Path) -> None:
    actual = tree(convert_fixture(scenario, tmp_path), COMPARED)
    expected = tree(FIXTURES / scenario / "expected")
    assert sorted(actual) == sorted(expected)
    diffs = [_diff(rel, data, actual[rel]) for rel, data in expected.items() if actual[rel] != data]
    assert not diffs, "\n".join(diffs)


def _diff(rel: str, expected: bytes, actual: bytes) -> str:
    e, a = (b.decode(errors="replace").splitlines(True) for b in (expected, actual))
    return "".join(difflib.unified_diff(e, a, f"expected/{rel}", f"actual/{rel}"))


@pytest.mark.parametrize("scenario", params(LINKS_XFAIL))
def test_links_point_at_files(scenario: str, tmp_path: Path) -> None:
    assert dangling_links(convert_fixture(scenario, tmp_path)) == []


@pytest.mark.parametrize("scenario", scenarios())
def test_input_is_never_modified(scenario: str, tmp_path: Path) -> None:
    vault = FIXTURES / scenario / "input"
    before = tree_hashes(vault)
    convert(vault, tmp_path / "out")
    assert tree_hashes(vault) == before
