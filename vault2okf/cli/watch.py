"""``vault2okf watch VAULT -o BUNDLE``: keep a bundle (and with ``--index`` its index) following the vault.

The watcher is ``vault2okf.watch.Watcher``; this command hands it the retriever's indexer (``index_bundle``) when
``--index`` asks for it, so the library never imports the retriever.
"""

from __future__ import annotations

from pathlib import Path

import typer

from vault2okf.cli.options import CONFIG, FORCE, VAULT
from vault2okf.cli.render import echo
from vault2okf.errors import Vault2OkfError
from vault2okf.watch import Indexer, Warmer, Watcher, now


def watch_cmd(
    vault: Path = VAULT,
    out: Path = typer.Option(..., "-o", "--out", help="The bundle folder to keep up to date."),
    index: bool = typer.Option(False, "--index", help="Also keep the bundle's index (Chroma) up to date."),
    embedder: str = typer.Option("bge-m3", "--embedder", help="With --index: bge-m3, minilm, or a folder."),
    device: str = typer.Option("cpu", "--device", help="With --index: where the embedder runs (cpu, cuda)."),
    debounce: int = typer.Option(300, "--debounce", help="Rebuild after this many ms without file events."),
    config: Path | None = CONFIG,
    force: bool = FORCE,
) -> None:
    """Convert VAULT into BUNDLE, then rebuild it (and with --index its index) whenever the vault changes."""
    if debounce < 0:
        raise Vault2OkfError(f"--debounce {debounce}: give a number of milliseconds, 0 or more")
    indexer, warmer = _indexer(embedder) if index else (None, None)
    watcher = Watcher(
        vault,
        out,
        config_path=config,
        force=force,
        indexer=indexer,
        index_options={"embedder_name": embedder, "device": device},
        warmer=warmer,
        debounce_ms=debounce,
        echo=echo,
    )
    try:
        with watcher.signals():
            watcher.run()
    except KeyboardInterrupt:
        typer.echo(f"{now()} interrupted; the bundle at {watcher.out} is the last whole conversion")
        raise typer.Exit(130) from None
    typer.echo(f"{now()} stopped after {watcher.rebuilds} rebuild(s); {watcher.out} is the last whole conversion")


def _indexer(embedder: str) -> tuple[Indexer, Warmer]:
    """The retriever's ``index_bundle`` and ``warm_index`` (what an edit's index opens, opened at the start), once
    ``embedder`` is known to load (an unknown name or missing weights fail before any work)."""
    try:
        from retriever.embed import check_embedder
        from retriever.index import index_bundle, warm_index
    except ImportError as e:
        raise Vault2OkfError("--index is not available: the retriever is not installed") from e
    check_embedder(embedder)
    return index_bundle, warm_index
