"""The shipped golden sets are valid and every gold path is a note of its vault (as scripts/check_golden.py checks)."""

from __future__ import annotations

import json
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from eval.golden import Tier, load_golden

ROOT = Path(__file__).resolve().parents[1]
VAULTS = ROOT.parent / "shared" / "vaults"
SCRIPT = ROOT / "scripts" / "check_golden.py"
SETS = sorted(p.stem for p in (ROOT / "golden").glob("*.jsonl"))
# Vaults whose notes include numbered session notes get a temporal tier; the others must not have one.
WITH_SESSIONS = {"thellade", "children-of-ash", "daggerheart", "blades-of-vengeance", "perrins-notes"}


def test_every_shared_vault_with_a_set_is_covered() -> None:
    assert set(SETS) == {p.name for p in VAULTS.iterdir() if p.is_dir()} or not VAULTS.is_dir()  # all seven


@pytest.mark.parametrize("vault", SETS)
def test_golden_set_is_valid_against_its_vault(vault: str) -> None:
    root = VAULTS / vault
    if not root.is_dir():
        pytest.skip(f"{root} not present")
    notes = {unicodedata.normalize("NFC", p.relative_to(root).as_posix()) for p in root.rglob("*.md")}
    questions = load_golden(ROOT / "golden" / f"{vault}.jsonl", known_paths=notes)
    counts = {t.value: sum(q.tier is t for q in questions) for t in Tier}
    assert len(questions) >= 30
    assert counts["unanswerable"] >= 2
    if vault in WITH_SESSIONS:
        need = 12 if vault in {"thellade", "children-of-ash"} else 9
        assert all(counts[t] >= need for t in ("lookup", "synthesis", "temporal")), counts
    else:
        assert counts["temporal"] == 0, counts
        assert counts["lookup"] >= 12 and counts["synthesis"] >= 12, counts


@pytest.mark.parametrize("vault", SETS)
def test_check_script_passes(vault: str) -> None:
    if not (VAULTS / vault).is_dir():
        pytest.skip("vault not present")
    done = subprocess.run([sys.executable, str(SCRIPT), f"golden/{vault}.jsonl", str(VAULTS / vault)], cwd=ROOT,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_check_script_all_mode_passes() -> None:
    if not VAULTS.is_dir():
        pytest.skip("shared vaults not present")
    done = subprocess.run([sys.executable, str(SCRIPT), "--all", "--vaults", str(VAULTS)], cwd=ROOT,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(SETS)}/{len(SETS)} golden sets OK" in done.stdout


def test_check_script_rejects_a_temporal_tier_on_a_vault_without_sessions(tmp_path: Path) -> None:
    vault = tmp_path / "wiki"
    vault.mkdir()
    (vault / "A.md").write_text("alpha fact", encoding="utf-8")
    row = {"id": "x-t01", "tier": "temporal", "question": "q?", "gold": ["A.md"]}
    row |= {"answer": "a", "answer_entities": ["alpha"]}
    line = json.dumps(row)
    golden = tmp_path / "wiki.jsonl"
    golden.write_text(line + "\n", encoding="utf-8")
    done = subprocess.run([sys.executable, str(SCRIPT), str(golden), str(vault)], capture_output=True, text=True)
    assert done.returncode == 1
    assert "no session notes" in done.stderr
    assert "at least two session notes" in done.stderr
    assert "needs at least 30" in done.stderr
