"""``vault2okf mcp BUNDLE [BUNDLE ...]``: the bundles served read-only over MCP (``retriever.agent.mcp_server``)."""

from __future__ import annotations

from pathlib import Path

import typer


def mcp_cmd(
    bundles: list[Path] = typer.Argument(
        ..., metavar="BUNDLE...", help="Bundles written by `vault2okf convert` (indexed for search)."
    ),
    chroma_url: str | None = typer.Option(None, "--chroma-url", help="A Chroma server instead of each bundle's."),
) -> None:
    """Serve BUNDLES read-only over MCP (stdio): search, read_note, neighbours, sql, schema, link_health."""
    from retriever.agent.mcp_server import build_server, open_library, unindexed
    from retriever.encoder import encoder_notice
    from vault2okf.cli.render import notes

    library = open_library(bundles, chroma_url=chroma_url)
    notes([*unindexed(library), *map(encoder_notice, bundles)])
    build_server(library).run("stdio")
