"""The layers of docs/ARCHITECTURE.md, checked from the imports of every module (read with ``ast``, nothing run).

Each module of ``vault2okf/``, ``retriever/`` and ``eval/`` belongs to one layer, by its dotted name (the
longest prefix in ``LAYERS`` wins); a layer imports its own modules and those of the layers ``MAY_IMPORT``
names, never the other way. Imports inside functions (the lazy ones) and under ``TYPE_CHECKING`` count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("vault2okf", "retriever", "eval")
LAYERS = {  # module prefix -> layer
    "vault2okf.cli": "cli",  # the composition root: one module per command
    "vault2okf.doctor": "cli",  # the install's checks: every package's dependencies, like the root
    "vault2okf.__main__": "cli",  # `python -m vault2okf`: the console command
    "eval": "eval",
    "retriever.agent": "agent",  # the agent loop, the tools, the MCP server
    "retriever.answer": "answer",  # answerers, prompt, answer schema; ask = retrieve, then answer
    "retriever.serve": "serve",  # `vault2okf serve`: the HTTP API, MCP over HTTP, the web page, the CLI's client
    "retriever": "search",  # the search core: okf reader, chunks, embedder, store, index, retrieve, rankers
    "vault2okf": "convert",  # the converter: walk, parse, resolve, rewrite, bundle, report, watch
}
MAY_IMPORT = {  # layer -> the layers below it that it may import (each may import its own)
    "cli": {"eval", "serve", "agent", "answer", "search", "convert"},
    "eval": {"agent", "answer", "search"},
    "serve": {"agent", "answer", "search"},
    "agent": {"answer", "search"},
    "answer": {"search"},
    "search": set(),
    "convert": set(),
}
# The bundle's file protocols, which the producer defines and every reader of a bundle shares.
SHARED = {"vault2okf.lock", "vault2okf.errors"}
PRINTS = {"cli"}  # the layers that may import typer (print, exit): library code returns values


def layer_of(module: str) -> str | None:
    prefixes = [p for p in LAYERS if module == p or module.startswith(p + ".")]
    return LAYERS[max(prefixes, key=len)] if prefixes else None


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, absolute, with its line: ``import a.b``, ``from a.b import c`` (as
    ``a.b.c``, which may be a module or a name in ``a.b``)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: a relative import; write it absolute"
            out += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return out


def wrong_way(module: str, path: Path) -> list[str]:
    """The imports of ``module`` that go against the layers."""
    own = layer_of(module)
    problems = []
    for line, name in imports(path):
        if any(name == s or name.startswith(s + ".") for s in SHARED):
            continue
        target = layer_of(name)
        if own not in PRINTS and name.split(".")[0] in ("typer", "click"):
            problems.append(f"{module}:{line} ({own}) imports {name}: only the CLI prints")
        if target is None or target == own or target in MAY_IMPORT[own]:
            continue
        problems.append(f"{module}:{line} ({own}) imports {name} ({target})")
    return problems


def test_every_module_has_a_layer() -> None:
    assert [m for m in modules() if layer_of(m) is None] == []
    assert {layer_of("retriever.retrieve"), layer_of("retriever.agent.loop"), layer_of("vault2okf.cli.ask")} == {
        "search",
        "agent",
        "cli",
    }


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_go_one_way(package: str) -> None:
    problems = [p for module, path in modules().items() if module.split(".")[0] == package
                for p in wrong_way(module, path)]  # fmt: skip
    assert problems == []


def test_a_wrong_way_import_is_caught(tmp_path: Path) -> None:
    """The check itself: a search-core module importing the agent, the converter importing the retriever."""
    planted = tmp_path / "planted.py"
    planted.write_text("import typer\n\ndef f():\n    from retriever.agent.tools import BundleTools\n", "utf-8")
    problems = wrong_way("retriever.planted", planted)
    assert len(problems) == 2, problems
    assert "retriever.agent.tools.BundleTools (agent)" in problems[1] and "only the CLI prints" in problems[0]
    assert wrong_way("vault2okf.planted", planted) != []
