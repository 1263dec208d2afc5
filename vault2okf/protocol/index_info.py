"""What ``index.json`` records (``IndexInfo``): enough to reopen a bundle's index and embed questions the same way.
Written by ``vault2okf index`` (``retriever.index``), read by every search, the question encoder and the servers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from vault2okf.protocol import STATE_DIR, BundleError
from vault2okf.protocol.lock import holder


@dataclass(frozen=True)
class IndexInfo:
    """What index.json records: enough to reopen the collection and embed questions the same way."""

    embedder: str  # Embedder.name
    embedder_spec: str  # what get_embedder loads it from
    collection: str
    chroma_path: str | None
    chroma_url: str | None
    max_tokens: int
    min_tokens: int
    notes: int
    chunks: int
    indexed_at: str


def index_info_path(bundle_dir: Path | str) -> Path:
    return Path(bundle_dir) / STATE_DIR / "index.json"


def read(bundle_dir: Path | str, *, error: type[Exception] = BundleError) -> IndexInfo:
    """What the last `vault2okf index` recorded; ``error`` when the bundle was never indexed or the record is
    unreadable, saying what to run."""
    path = index_info_path(bundle_dir)
    if not path.is_file():
        running = holder(bundle_dir)
        if running and running[1] == "indexing":
            raise error(
                f"{bundle_dir} is being indexed for the first time (pid {running[0]}): search when it finishes."
            )
        raise error(f"{bundle_dir} has no index: run `vault2okf index {bundle_dir}` first.")
    try:
        return IndexInfo(**json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, TypeError) as e:
        raise error(f"{path} is unreadable ({e}): run `vault2okf index {bundle_dir}` again.") from e
