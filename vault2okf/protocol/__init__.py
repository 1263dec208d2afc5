"""The bundle's on-disk protocol: what the producer (``vault2okf``) writes and every reader (``retriever``, ``eval``,
the MCP and HTTP servers) relies on. The layout (the database and the state folder, by name), the schema version
readers accept, the base error both sides raise, the bundle lock (``lock``), what ``index.json`` records
(``index_info``) and the disk-full helpers both writers share (``disk``). It imports nothing of either side, and
both import it (``tests/test_layers.py``: the ``protocol`` layer)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

DATABASE = "okf.duckdb"  # the bundle's database: concepts, links, mentions, analytics (docs/ARCHITECTURE.md)
STATE_DIR = ".vault2okf"  # the bundle's state: caches, the index, the server's address; never part of the OKF
SCHEMA_VERSION = 3  # the okf.duckdb schema the readers read (the producer's migrations end here: tests/test_layers)


class BundleError(Exception):
    """Base of the errors of both sides of the protocol (``Vault2OkfError``, ``RetrieverError``): a message that
    says what went wrong, where, and how to fix it."""


def bundle_names(bundles: Iterable[Path | str]) -> dict[str, Path]:
    """Name -> path (as given) of each bundle, as every face that serves several names them (``mcp``, ``serve``):
    the resolved folder's name, made unique with -2, -3 … in the order given; one folder is served once."""
    named: dict[str, Path] = {}
    seen: set[Path] = set()
    for bundle in bundles:
        path = Path(bundle).resolve()
        if path in seen:
            continue
        seen.add(path)
        name, n = path.name or "bundle", 1
        while name in named:
            n += 1
            name = f"{path.name}-{n}"
        named[name] = Path(bundle)
    return named


def database(bundle: Path | str) -> Path:
    return Path(bundle) / DATABASE


def not_a_folder(bundle: Path | str) -> str | None:
    """The error for a bundle path that is a file (None when it is not one): advice that does not loop, since
    `convert -o` refuses a file as its output too."""
    if Path(bundle).exists() and not Path(bundle).is_dir():
        return (
            f"{bundle} is a file, not a bundle: give the folder that `vault2okf convert VAULT -o FOLDER` wrote "
            "(convert writes a bundle only to a new or empty folder)"
        )
    return None


def state_dir(bundle: Path | str) -> Path:
    return Path(bundle) / STATE_DIR
