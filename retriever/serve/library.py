"""The served bundles: each a ``Served`` whose snapshot (the opened retriever and the generation it was read at)
is replaced whole when a ``convert`` or ``index`` replaces the bundle under the running server.

A request takes ``served.current()`` once and uses that snapshot throughout, so it is answered from the old
bundle or from the new one, never from a mix: the retriever holds the graph and the chunk table in memory, read
at one generation (the stamps of ``okf.duckdb`` and ``.vault2okf/index.json`` before and after the open agree).
Between a convert's swaps, or while a new bundle cannot be opened yet, the old snapshot serves and the next
request tries again.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from retriever.agent.tools import BundleTools, ToolError
from retriever.agent.tools.context import stamp
from retriever.errors import RetrieverError
from retriever.retrieve import DEFAULT_SPEC, Retriever
from retriever.serve import ServeError
from vault2okf.protocol import bundle_names

# One search a bundle runs when it opens, before the server says it is listening (or swaps in a new index): the
# first question a client sends then costs what any later one does.
WARM_QUESTION = "Which notes are about this?"

Stamps = tuple[tuple[int, int, int] | None, tuple[int, int, int] | None]
RETRY_S = 1.0  # a bundle that could not be opened is tried again at most this often


@dataclass(frozen=True)
class Snapshot:
    """One bundle at one generation: its retriever (None when it has no usable index, ``error`` says why)."""

    generation: str
    stamps: Stamps
    retriever: Retriever | None
    error: str | None
    notes: int
    chunks: int
    notices: tuple[str, ...] = ()
    vault: str | None = None  # the vault's name (meta), for obsidian:// URIs
    opened: float = field(default_factory=time.monotonic)

    @property
    def index(self) -> str:
        return "ready" if self.retriever is not None else ("missing" if self.error is None else "unavailable")


def stamps_of(bundle: Path) -> Stamps:
    return stamp(bundle / "okf.duckdb"), stamp(bundle / ".vault2okf" / "index.json")


def generation_of(stamps: Stamps) -> str:
    """A short id of the bundle version the stamps describe (what `/health` says is served)."""
    return hashlib.sha1(repr(stamps).encode()).hexdigest()[:12]


class ServedTools(BundleTools):
    """The tool layer over a served bundle, searching with the served snapshot's retriever (no second copy)."""

    served: Served

    def retriever(self) -> Retriever:
        snapshot = self.served.current()
        if snapshot.retriever is None:
            raise ToolError(f"search is unavailable: {snapshot.error}; read_note, neighbours and sql still work")
        return snapshot.retriever

    def graph(self) -> Any:
        snapshot = self.served.current()
        return snapshot.retriever.graph if snapshot.retriever is not None else super().graph()


class Served:
    """One served bundle by name; thread-safe."""

    def __init__(self, name: str, bundle: Path, *, chroma_url: str | None = None) -> None:
        self.name = name
        self.bundle = bundle
        self.chroma_url = chroma_url
        self.tools = ServedTools(bundle, chroma_url=chroma_url)
        self.tools.served = self
        self._lock = threading.Lock()
        self._snapshot = self._open()
        self._failed_at = 0.0

    def current(self) -> Snapshot:
        """The snapshot of the bundle as it is now: the held one while the bundle's files are unchanged (or
        cannot be opened yet), else a new one, opened once while other requests keep the old one."""
        snapshot = self._snapshot
        now = stamps_of(self.bundle)
        if now == snapshot.stamps or now[0] is None or time.monotonic() - self._failed_at < RETRY_S:
            return snapshot
        with self._lock:
            if self._snapshot.stamps != stamps_of(self.bundle):
                try:
                    self._snapshot = self._open()
                except (RetrieverError, OSError):
                    self._failed_at = time.monotonic()  # half written: the old one serves until the next try
            return self._snapshot

    def _open(self) -> Snapshot:
        """The bundle opened at one generation: the stamps agree before and after the open (else again)."""
        for _ in range(5):
            before = stamps_of(self.bundle)
            snapshot = self._open_at(before)
            if stamps_of(self.bundle) == before:
                return replace(snapshot, vault=self._vault())
        raise ServeError(f"{self.bundle} kept changing while it was opened: try again when convert/index is done")

    def _open_at(self, stamps: Stamps) -> Snapshot:
        from retriever.graph import load_graph

        graph = load_graph(self.bundle)
        if stamps[1] is None:
            return Snapshot(generation_of(stamps), stamps, None, None, len(graph.concepts), 0)
        try:
            retriever = Retriever.open(self.bundle, chroma_url=self.chroma_url, graph=graph)
            retriever.prepare(DEFAULT_SPEC)
            retriever.search(WARM_QUESTION, DEFAULT_SPEC)  # the encoder run at a question's shape, each stage once
        except RetrieverError as e:
            return Snapshot(generation_of(stamps), stamps, None, str(e), len(graph.concepts), 0)
        chunks = len(retriever.table.ids)
        return Snapshot(generation_of(stamps), stamps, retriever, None, len(graph.concepts), chunks, retriever.notices)

    def _vault(self) -> str | None:
        self.tools.follow()  # the database as it is now
        rows = self.tools.select("SELECT value FROM meta WHERE key = 'vault'")
        return str(rows[0][0]) if rows else None

    def describe(self) -> dict[str, Any]:
        """The bundle as `/health` lists it."""
        snapshot = self.current()
        st = stamp(self.bundle / "okf.duckdb")
        converted = datetime.fromtimestamp(st[1] / 1e9, UTC).isoformat(timespec="seconds") if st else None
        return {
            "name": self.name,
            "path": str(self.bundle),
            "vault": snapshot.vault,
            "converted_at": converted,
            "notes": snapshot.notes,
            "chunks": snapshot.chunks,
            "index": snapshot.index,
            "generation": snapshot.generation,
        }

    def embedder(self) -> str | None:
        retriever = self._snapshot.retriever
        return getattr(retriever.embedder, "name", None) if retriever is not None else None


class Library:
    """The served bundles by name (the folder name, made unique with -2, -3 …, as `vault2okf mcp` names them)."""

    def __init__(self, bundles: Sequence[Path], *, chroma_url: str | None = None) -> None:
        named = bundle_names(bundles)
        self.bundles = {name: Served(name, path.resolve(), chroma_url=chroma_url) for name, path in named.items()}
        if not self.bundles:
            raise ServeError("no bundle to serve: name at least one bundle written by `vault2okf convert`")

    def get(self, name: str | None) -> Served:
        """The bundle ``name`` names; with one bundle served, ``name`` may be omitted."""
        if not name:
            if len(self.bundles) == 1:
                return next(iter(self.bundles.values()))
            raise BadRequest(f"several bundles are served: pass bundle, one of {', '.join(self.bundles)}")
        if name not in self.bundles:
            raise NotFound(f"no bundle {name!r}: the bundles are {', '.join(self.bundles)}")
        return self.bundles[name]


class BadRequest(ServeError):
    """400: the request is not one the API takes."""


class NotFound(ServeError):
    """404: no such bundle or note."""
