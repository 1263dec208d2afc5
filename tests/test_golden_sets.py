"""The shipped golden sets are valid and every gold path is a note of its vault (as scripts/check_golden.py checks)."""

from __future__ import annotations

import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from eval.golden import Tier, load_golden

ROOT = Path(__file__).resolve().parents[1]
VAULTS = ROOT.parent / "shared" / "vaults"
MINIMUM = {"thellade": {"lookup": 10, "synthesis": 10, "temporal": 10, "unanswerable": 2}, "children-of-ash": {}}


@pytest.mark.parametrize("vault", sorted(MINIMUM))
def test_golden_set_is_valid_against_its_vault(vault: str) -> None:
    root = VAULTS / vault
    if not root.is_dir():
        pytest.skip(f"{root} not present")
    notes = {unicodedata.normalize("NFC", p.relative_to(root).as_posix()) for p in root.rglob("*.md")}
    questions = load_golden(ROOT / "golden" / f"{vault}.jsonl", known_paths=notes)
    counts = {t.value: sum(q.tier is t for q in questions) for t in Tier}
    assert all(counts[t] >= n for t, n in MINIMUM[vault].items())
    assert len(questions) >= (32 if vault == "thellade" else 15)


@pytest.mark.parametrize("vault", sorted(MINIMUM))
def test_check_script_passes(vault: str) -> None:
    if not (VAULTS / vault).is_dir():
        pytest.skip("vault not present")
    script = ROOT / "scripts" / "check_golden.py"
    done = subprocess.run([sys.executable, str(script), f"golden/{vault}.jsonl", str(VAULTS / vault)], cwd=ROOT,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
