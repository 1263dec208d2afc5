"""``vault2okf serve BUNDLE...``: one warm local service over the bundles (``retriever.serve``; docs/API.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from retriever.answer.backends import AnswerSpec
from vault2okf.cli.options import answer_options


@answer_options
def serve_cmd(
    bundles: list[Path] = typer.Argument(
        ..., metavar="BUNDLE...", help="Bundles written by `vault2okf convert` (indexed for search)."
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; anything but loopback needs --token."),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port (0: one the system picks)."),
    token: str | None = typer.Option(
        None,
        "--token",
        envvar="VAULT2OKF_TOKEN",
        help="Require Authorization: Bearer TOKEN on every request (or VAULT2OKF_TOKEN).",
    ),
    allow_host: list[str] = typer.Option(
        [], "--allow-host", help="Another Host name to answer to (behind a tunnel or proxy); repeatable."
    ),
    time_limit: float = typer.Option(120.0, "--time-limit", min=1.0, help="Seconds one request may take."),
    chroma_url: str | None = typer.Option(None, "--chroma-url", help="A Chroma server instead of each bundle's."),
    *,
    answer: AnswerSpec,
) -> None:
    """Serve BUNDLES read-only over HTTP: /search, /ask (streamed), /notes, /links, MCP at /mcp, a web page at /."""
    from retriever.serve.app import ServeSpec, bind, serve
    from retriever.serve.library import Library
    from vault2okf.cli.render import echo

    spec = ServeSpec(host=host, port=port, token=token or None, answer=answer, time_limit=time_limit,
                     allow_hosts=tuple(allow_host))  # fmt: skip
    spec.check()  # off loopback without a token: refused before anything loads
    answer.check()  # a missing GGUF or model ID: said before anything loads
    sock = bind(host, port)  # a taken port fails now, before the models load
    library = Library(bundles, chroma_url=chroma_url)
    for served in library.bundles.values():
        snapshot = served.current()
        for line in [*snapshot.notices, *([snapshot.error] if snapshot.error else [])]:
            echo(f"note: {served.name}: {line}", err=True)

    def ready(url: str) -> None:
        names = ", ".join(library.bundles)
        echo(f"serving {names} at {url}/ (MCP: {url}/mcp); Ctrl-C stops", err=True)

    serve(library, spec, on_ready=ready, sock=sock)
