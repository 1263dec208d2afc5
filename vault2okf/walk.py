"""Walk a vault: notes (``*.md``) and attachments (other files), skipping what Obsidian and the user hide."""

from __future__ import annotations

import fnmatch
import os
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from vault2okf.errors import Vault2OkfError

SKIPPED_DIRS = frozenset({".obsidian", ".trash", ".git"})


@dataclass(frozen=True)
class VaultFile:
    path: str  # vault-relative, "/" separators, NFC
    abs_path: Path


@dataclass(frozen=True)
class Walk:
    notes: tuple[VaultFile, ...]
    attachments: tuple[VaultFile, ...]
    skipped: tuple[tuple[str, str], ...]  # (path, reason)


def walk_vault(root: Path, exclude: tuple[str, ...] = ()) -> Walk:
    if not root.is_dir():
        raise Vault2OkfError(f"vault not found: {root} is not a folder")
    root = root.resolve()
    notes: list[VaultFile] = []
    attachments: list[VaultFile] = []
    skipped: list[tuple[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = _rel(Path(dirpath), root)
        dirnames[:] = sorted(d for d in dirnames if _keep_dir(rel_dir, d, exclude, skipped))
        for name in sorted(filenames):
            abs_path = Path(dirpath) / name
            path = f"{rel_dir}/{name}" if rel_dir else name
            path = unicodedata.normalize("NFC", path)
            reason = _skip_file(abs_path, root, name, path, exclude)
            if reason:
                skipped.append((path, reason))
            elif name.lower().endswith(".md"):
                notes.append(VaultFile(path, abs_path))
            else:
                attachments.append(VaultFile(path, abs_path))
    return Walk(tuple(sorted(notes, key=_key)), tuple(sorted(attachments, key=_key)), tuple(sorted(skipped)))


def _key(f: VaultFile) -> str:
    return f.path


def _rel(path: Path, root: Path) -> str:
    rel = path.relative_to(root).as_posix()
    return "" if rel == "." else unicodedata.normalize("NFC", rel)


def _keep_dir(rel_dir: str, name: str, exclude: tuple[str, ...], skipped: list[tuple[str, str]]) -> bool:
    path = f"{rel_dir}/{name}" if rel_dir else name
    if name in SKIPPED_DIRS or name.startswith("."):
        return False
    if _excluded(path, name, exclude):
        skipped.append((path + "/", "excluded by config [walk] exclude"))
        return False
    return True


def _skip_file(abs_path: Path, root: Path, name: str, path: str, exclude: tuple[str, ...]) -> str:
    if name.startswith(".") and name != ".md":
        return "hidden file"
    if _excluded(path, name, exclude):
        return "excluded by config [walk] exclude"
    if abs_path.is_symlink():
        target = abs_path.resolve()
        if not target.is_relative_to(root):
            return f"symlink pointing outside the vault ({target})"
        if not target.is_file():
            return "symlink to something that is not a file"
    return ""


def _excluded(path: str, name: str, exclude: tuple[str, ...]) -> bool:
    return any(path == e.strip("/") or name == e or fnmatch.fnmatchcase(path, e) for e in exclude)
