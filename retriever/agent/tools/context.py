"""What every tool shares over one bundle (``ToolContext``): the caps, the read-only database, the notes, the
search the model's arguments adjust, and the retriever and link graph, each opened on first use."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from retriever.agent.tools.notes import Notes
from retriever.agent.tools.results import Limits, ToolError, fit
from retriever.agent.tools.sandbox import Sandbox
from retriever.errors import RetrieverError
from retriever.okf import check_bundle, read_bundle
from retriever.retrieve import DEFAULT_SPEC, Retriever, SearchSpec
from vault2okf.protocol import database
from vault2okf.protocol.index_info import index_info_path


class ToolContext:
    """One bundle as the tools see it; thread-safe (a server may run calls side by side)."""

    def __init__(
        self,
        bundle: Path,
        *,
        chroma_url: str | None = None,
        limits: Limits | None = None,
        spec: SearchSpec | None = None,
        retriever: Retriever | None = None,
    ) -> None:
        """``spec`` is the search the model's ``mode`` and ``k`` adjust (budget, ranker, seeds: the CLI's options);
        ``retriever``, one already open on this bundle (``ask --agent`` reuses its own), else one opens lazily."""
        with read_bundle(bundle):  # exists, has okf.duckdb, a schema this code reads
            pass
        self.bundle = Path(bundle)
        self.limits = limits or Limits()
        self.chroma_url = chroma_url
        self.spec = spec or DEFAULT_SPEC  # what `vault2okf search` does with no options
        self.db = Sandbox(check_bundle(bundle), self.limits)
        self.notes = Notes(self.bundle, self.db)
        self._retriever_lock = threading.Lock()
        self._retriever: Retriever | None = retriever
        self._graph: Any = None
        self._stamps = (stamp(database(self.bundle)), stamp(index_info_path(self.bundle)))

    def follow(self) -> None:
        """Serve the bundle as it is now: after a `convert` replaced its database (a server outlives many, under
        `watch`), reopen the database and forget the notes, graph and retriever read from the old one; after an
        `index`, reopen the retriever. The old connection closes when the calls still using it are done."""
        now = (stamp(database(self.bundle)), stamp(index_info_path(self.bundle)))
        if now == self._stamps or now[0] is None:  # unchanged, or between a convert's swaps: the old one serves
            return
        with self._retriever_lock:
            if now[0] != self._stamps[0]:
                try:
                    db = Sandbox(check_bundle(self.bundle), self.limits)
                except RetrieverError:
                    return  # half written, or damaged: the old database serves until the next call
                self.db, self.notes, self._graph = db, Notes(self.bundle, db), None
            self._retriever, self._stamps = None, now

    def retriever(self) -> Retriever:
        """The opened retriever (Chroma + embedder), loaded on the first search only."""
        with self._retriever_lock:
            if self._retriever is None:
                try:
                    self._retriever = Retriever.open(self.bundle, chroma_url=self.chroma_url, graph=self.graph())
                except RetrieverError as e:
                    raise ToolError(f"search is unavailable: {e}; read_note, neighbours and sql still work") from e
                self._retriever.prepare()
            return self._retriever

    def graph(self) -> Any:
        if self._graph is None:
            from retriever.graph import load_graph

            self._graph = load_graph(self.bundle)
        return self._graph

    def select(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        return self.db.select(sql, params)

    def fit(self, payload: dict[str, Any], hint: str, *keys: str) -> dict[str, Any]:
        """Drop items from the end of the lists ``payload[key]``, key by key, until the JSON fits ``max_chars``."""
        return fit(payload, self.limits.max_chars, hint, *keys)

    def close(self) -> None:
        self.db.close()


def stamp(path: Path) -> tuple[int, int, int] | None:
    """What changes when a file is written again (`convert` swaps the bundle, `index` rewrites index.json): its
    inode, time and size; None when it is not there."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size
