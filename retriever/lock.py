"""The bundle lock: one `vault2okf convert` or `vault2okf index` at a time per bundle.

The lock is a file beside the bundle, ``PARENT/.NAME.lock``, held with ``fcntl.flock`` for the whole run and
released by the kernel when the process ends, however it ends (kill -9 included). It lives beside the bundle,
not inside it, because `convert` swaps the bundle folder. The one implementation is `vault2okf.protocol.lock` (the
lock is a protocol of the bundle's files, which the producer defines); `vault2okf.bundle` takes it for convert.
"""

import re
from contextlib import AbstractContextManager
from pathlib import Path

from retriever.errors import RetrieverError
from vault2okf.protocol import STATE_DIR, lock
from vault2okf.protocol.lock import holder, lock_path

__all__ = ["bundle_lock", "check_no_stranded_index", "holder", "lock_path"]

STATE = STATE_DIR
STATE_ENTRIES = ("chroma", "index.json")


def bundle_lock(bundle_dir: Path | str, doing: str) -> AbstractContextManager[None]:
    """Hold the bundle's lock while `doing` (``indexing``); RetrieverError at once when another run holds it."""
    return lock.bundle_lock(bundle_dir, doing, error=RetrieverError)


def check_no_stranded_index(bundle_dir: Path | str) -> None:
    """RetrieverError when a killed `vault2okf convert` left this bundle's index beside it (``.NAME.tmp-PID``):
    indexing now would build a second index, while the next convert moves the first one back."""
    bundle = Path(bundle_dir).resolve()
    leftover = re.compile(rf"\.{re.escape(bundle.name)}\.(tmp|old)-\d+")
    siblings = bundle.parent.iterdir() if bundle.parent.is_dir() else iter(())
    for path in sorted(p for p in siblings if leftover.fullmatch(p.name)):
        stranded = [e for e in STATE_ENTRIES if (path / STATE / e).exists() and not (bundle / STATE / e).exists()]
        if stranded:
            raise RetrieverError(
                f"an interrupted `vault2okf convert` left the index of {bundle_dir} in {path}: run the convert "
                "again, which moves it back into the bundle, then index."
            )
