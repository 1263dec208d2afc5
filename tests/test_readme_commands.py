"""Every shell command in README.md and docs/*.md runs: each fenced ```sh / ```bash block is run by bash, in order,
in a scratch folder per file (``out/`` there, ``golden/`` a link to the repository's), with the shared vaults it
names copied beside it (``../shared/vaults/NAME`` is the copy: nothing is written in ../shared), and
``vault2okf`` on the PATH running this checkout.

A block is skipped, saying why, when it needs what this machine cannot give: AWS Bedrock, a GPU, the network
(an install, a download) or a long-running server. A block says so in a first-line comment ``# needs: KIND
(why)``; a block that plainly needs one (``--llm bedrock``, ``--gpu-layers``, ``pip install``, ``vault2okf
mcp``...) is skipped as that kind without one. Everything else must run and exit 0, and every vault copy must
be unchanged afterwards. Keep the runnable blocks cheap: children-of-ash, ``--embedder minilm``, ``--llm
extract``.
"""

from __future__ import annotations

import filecmp
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_VAULTS = ROOT.parent / "shared" / "vaults"
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(sh|bash)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
NEEDS = re.compile(r"^#[ \t]*needs:[ \t]*(\w+)[ \t]*(.*)$", re.M)
VAULT = re.compile(r"\.\./shared/vaults/([\w.-]+)")
KINDS = {  # what a block may need that this machine cannot give, and what gives it away
    "bedrock": ("needs AWS Bedrock (an account, credentials, the network)", r"--llm bedrock"),
    "gpu": ("needs a GPU", r"--gpu-layers|--device cuda|GGML_VULKAN|vulkaninfo"),
    "network": ("needs the network", r"pip install|apt-get|huggingface-cli|--download|\bmake (demo|install|test)\b"),
    "server": ("starts a long-running server", r"vault2okf (mcp|serve|watch)\b"),
}


@dataclass(frozen=True)
class Block:
    file: Path
    line: int
    text: str

    @property
    def name(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}"

    def skip_reason(self) -> str | None:
        """Why this block cannot run here, or None. A ``# needs:`` comment names the kind; else the commands do."""
        marked = NEEDS.search(self.text)
        if marked:
            kind, why = marked.group(1), marked.group(2).strip().strip("()")
            assert kind in KINDS, f"{self.name}: '# needs: {kind}' is not one of {sorted(KINDS)}"
            return f"{KINDS[kind][0]}{': ' + why if why else ''}"
        for reason, pattern in KINDS.values():
            if re.search(pattern, self.text):
                return reason
        return None


def blocks_of(file: Path) -> list[Block]:
    text = file.read_text("utf-8")
    return [Block(file, text.count("\n", 0, m.start()) + 2, m.group(2)) for m in FENCE.finditer(text)]


BLOCKS = [block for file in FILES for block in blocks_of(file)]


@dataclass
class Scratch:
    """One file's scratch folder: ``repo/`` (the working directory), ``shared/vaults/`` (the copies)."""

    root: Path
    done: int = 0  # blocks of the file run (or skipped) so far, in order
    vaults: dict[str, Path] = field(default_factory=dict)

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    def copy_vaults(self, text: str) -> None:
        for name in set(VAULT.findall(text)) - set(self.vaults):
            source = SHARED_VAULTS / name
            if not source.is_dir():
                pytest.skip(f"{source} not present")
            copy = self.root / "shared" / "vaults" / name
            shutil.copytree(source, copy, symlinks=True)
            self.vaults[name] = copy


@pytest.fixture(scope="module")
def scratches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[Path, Scratch]]:
    made: dict[Path, Scratch] = {}
    yield made
    for scratch in made.values():  # the commands never wrote inside a vault
        for name, copy in scratch.vaults.items():
            assert_same_tree(SHARED_VAULTS / name, copy)


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding ``vault2okf``: this checkout's CLI, run by this Python."""
    folder = tmp_path_factory.mktemp("bin")
    script = folder / "vault2okf"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m vault2okf "$@"\n', "utf-8")
    script.chmod(0o755)
    return folder


def assert_same_tree(original: Path, copy: Path) -> None:
    compared = filecmp.dircmp(original, copy)
    assert not (compared.left_only or compared.right_only or compared.diff_files), (copy, compared.report())
    for sub in compared.common_dirs:
        assert_same_tree(original / sub, copy / sub)


def run(block: Block, scratch: Scratch, shim: Path) -> None:
    scratch.copy_vaults(block.text)
    env = {
        **os.environ,
        "PATH": f"{shim}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.text],
        cwd=scratch.repo, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, f"{block.name} exited {done.returncode}:\n{block.text}\n{done.stdout}\n{done.stderr}"


def test_the_docs_have_shell_blocks_that_use_the_shared_vaults() -> None:
    names = {block.file.name for block in BLOCKS if VAULT.search(block.text) and block.skip_reason() is None}
    assert {"README.md", "commands.md", "search.md", "evaluation.md"} <= names, names


def test_skips_are_told_apart() -> None:
    assert Block(ROOT, 1, 'vault2okf ask b "q" --llm bedrock --model m').skip_reason() == KINDS["bedrock"][0]
    assert Block(ROOT, 1, "make demo\nmake test").skip_reason() == KINDS["network"][0]
    assert Block(ROOT, 1, "vault2okf mcp out/b").skip_reason() == KINDS["server"][0]
    assert Block(ROOT, 1, "# needs: gpu (CUDA)\nvault2okf index b").skip_reason() == "needs a GPU: CUDA"
    assert Block(ROOT, 1, "# needs: bedrock\nvault2okf ask b q").skip_reason() == KINDS["bedrock"][0]
    assert Block(ROOT, 1, "vault2okf links out/b --json").skip_reason() is None


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=[block.name for block in BLOCKS])
def test_the_block_runs(block: Block, scratches: dict[Path, Scratch], shim: Path, tmp_path_factory) -> None:  # noqa: ANN001
    if block.file not in scratches:
        root = tmp_path_factory.mktemp(block.file.stem)
        scratches[block.file] = scratch = Scratch(root)
        scratch.repo.mkdir()
        (scratch.repo / "golden").symlink_to(ROOT / "golden")
    scratch = scratches[block.file]
    mine = blocks_of(block.file)
    index = next(i for i, b in enumerate(mine) if b.line == block.line)
    for earlier in mine[scratch.done : index]:  # what the file did before this block (when run alone: -k)
        if earlier.skip_reason() is None:
            run(earlier, scratch, shim)
    scratch.done = max(scratch.done, index + 1)
    reason = block.skip_reason()
    if reason:
        pytest.skip(reason)
    run(block, scratch, shim)
