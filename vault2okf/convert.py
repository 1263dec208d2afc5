"""``convert``: vault -> parsed notes -> resolved links -> OKF docs + link-health report + okf.duckdb.

The entry point: the walk, the bundle lock, the last convert's cache checked, the run (``vault2okf.run``) built
into a staging folder and swapped into place. A convert that finds nothing changed leaves the bundle as it was.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import Any

from vault2okf import bundle as b
from vault2okf.cache import CacheDamaged, ConvertCache, cache_key, cache_path, output_sig
from vault2okf.cache import load as load_cache
from vault2okf.cache import save as save_cache
from vault2okf.config import Config, load_config
from vault2okf.errors import Vault2OkfError
from vault2okf.meta import vault_base
from vault2okf.protocol.disk import disk_full_message, is_disk_full
from vault2okf.report import LinkReport
from vault2okf.run import Clock, Run
from vault2okf.suggest import WordsDamaged
from vault2okf.walk import Walk, Walked, walk_vault


class Removal(Enum):
    """What a convert that is no watcher does with the bundle's old generation once the new one is in place."""

    WAIT = "wait"  # delete it before returning (a library call: nothing is left beside the bundle)
    DETACH = "detach"  # leave it to a child process that outlives this one (the `convert` command)


@dataclass(frozen=True)
class ConvertResult:
    out: Path
    notes: int
    links: int
    load_report: Callable[[], LinkReport] = field(repr=False, compare=False)
    seconds: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)  # seconds per stage: walk, parse, resolve, write
    unchanged: bool = False  # nothing changed since the last convert: the bundle was left as it was
    reused: int = 0  # notes whose doc and rows were carried from the last convert unchanged
    known_totals: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    notices: tuple[str, ...] = ()  # what the user should know that is not about a note (a damaged cache)
    made: tuple[str, ...] | None = None  # the notes whose docs were made again (None: not known; unchanged: none)
    paths: tuple[str, ...] | None = None  # every note's vault path (None: not kept)
    bodies: dict[str, str] | None = field(default=None, repr=False)  # the notes made again -> md5 of the body
    # what the convert made, held rather than freed with it (``Removal.DETACH``: the command, whose process ends
    # without freeing it)
    held: tuple[Any, ...] = field(default=(), repr=False, compare=False)

    @cached_property
    def report(self) -> LinkReport:
        return self.load_report()

    @cached_property
    def totals(self) -> dict[str, Any]:
        """``report.totals()``, without reading the report when the convert found nothing changed."""
        return self.known_totals if self.known_totals is not None else self.report.totals()


@dataclass
class Kept:
    """What a watcher keeps in memory between its converts of one bundle: the last convert's cache as it saved it
    (every note's state decoded, and which of them its base file holds), and the signature of the file it saved.
    The next convert takes it instead of reading the file back, while that file is still the one saved (no other
    run wrote the bundle meanwhile) and the key (config, code) is the same; else it reads the bundle's cache as any
    convert does. Also the last walk of the vault, which the next convert patches with the paths the watcher's
    events named (``walk``), and the bundle's folders as it sealed them (``bundle.Listing``: while they are, no file
    was added to the bundle, and it is not listed again)."""

    key: str = ""
    cache: ConvertCache | None = None
    sig: tuple[int, ...] = ()
    used: bool = False  # the last convert started from what was kept (the bundle was as this process left it)
    removing: threading.Thread | None = field(default=None, repr=False)  # the old generation being deleted
    retired: Path | None = None  # where it is
    walked: Walked | None = field(default=None, repr=False)  # the last walk of the vault, to patch
    events: bool = False  # the caller says which paths changed before each convert (``note_changes``): a watcher
    changed: set[str] | None = None  # the paths file events named since that walk (None: not known)
    patched: bool = False  # the last walk was the one before it patched (``walk``)
    listing: b.Listing | None = field(default=None, repr=False)  # the bundle's folders as this process left them
    files: list[str] = field(default_factory=list, repr=False)  # the files its marker lists
    spare: b.Spare | None = field(default=None, repr=False)  # the old generation, kept to build the next one in
    emptying: threading.Thread | None = field(default=None, repr=False)  # ``bundle.empty`` of it, done meanwhile

    def last(self, out: Path, key: str) -> ConvertCache | None:
        self.used = self.cache is not None and key == self.key and output_sig(cache_path(out)) == self.sig
        if not self.used:
            self.cache = None  # stale: let it go before the bundle's own cache is read
        return self.cache

    def note_changes(self, paths: Iterable[str] | None) -> None:
        """Paths that changed in the vault (absolute, as file events name them) since the last walk; None: a
        change not known by its paths (the next walk is a whole one). Only where ``events`` is set does the walk
        after this one start from no path known to have changed: else each walk is a whole one, unless told."""
        if paths is None or self.changed is None:
            self.changed = None
        else:
            self.changed.update(paths)

    def walk(self, vault: Path, exclude: tuple[str, ...]) -> Walk:
        """The vault walked: the last walk patched with the paths that changed since, where it can be
        (``Walked.patch``), else walked whole."""
        changed, self.changed = self.changed, (set() if self.events else None)
        last, self.walked, self.patched = self.walked, None, False
        if last is not None and changed is not None and (last.root, last.exclude) == (vault, exclude):
            patched = last.patch(changed)
            if patched is not None:
                self.walked, self.patched = last, True
                return patched
        self.walked = Walked(vault, exclude)
        return self.walked.walk

    def keep(self, out: Path, key: str, cache: ConvertCache) -> None:
        self.key, self.cache, self.sig = key, cache, output_sig(cache_path(out))

    def remove_later(self, old: Path) -> None:
        """Delete the old generation of the bundle on a thread (thousands of unlinks and rmdirs, seconds on a
        busy disk), renamed first out of the next staging folder's way (``bundle.retire``): the next convert
        runs meanwhile. ``settle`` waits for it; one at a time."""
        self.settle()
        self.retired = b.retire(old)
        self.removing = threading.Thread(
            target=shutil.rmtree, args=(self.retired, True), name="vault2okf-remove", daemon=True
        )
        self.removing.start()

    def put_aside(
        self, old: Path, stage: Path, last: tuple[b.Listing | None, list[str]], shared: frozenset[str]
    ) -> None:
        """The old generation the swap left at ``stage``: kept to build the next one in (``bundle.Spare``) where
        this process sealed it (``last``: its listing and files), else deleted on a thread (``remove_later``)."""
        listing, files = last
        if listing is None or old != stage:
            self.remove_later(old)
            return
        self.spare = spare = b.Spare(old, listing, files, shared)

        def empty() -> None:  # what the next convert's ``bundle.recycle`` would do first (0.1 s at 13k notes)
            self.spare = b.empty(spare)

        self.emptying = threading.Thread(target=empty, name="vault2okf-empty", daemon=True)
        self.emptying.start()

    def emptied(self) -> None:
        """Wait for the kept generation to be emptied (``put_aside``): ``spare`` is what it left."""
        if self.emptying is not None:
            self.emptying.join()
            self.emptying = None

    def busy(self) -> tuple[Path, ...]:
        """The old generations this process deletes or keeps beside the bundle: no leftovers of a killed run."""
        self.emptied()
        return tuple(p for p in (self.retired, self.spare.path if self.spare else None) if p is not None)

    def settle(self) -> None:
        self.emptied()
        if self.removing is not None:
            self.removing.join()
            self.removing = self.retired = None

    def close(self) -> None:
        """Nothing left beside the bundle: the old generation being deleted waited for, the one kept deleted."""
        self.settle()
        if self.spare is not None:
            shutil.rmtree(self.spare.path, ignore_errors=True)
            self.spare = None


def convert(
    vault: Path,
    out: Path,
    *,
    config_path: Path | None = None,
    force: bool = False,
    full: bool = False,
    kept: Kept | None = None,
    removal: Removal = Removal.WAIT,
    warm: bool = False,
) -> ConvertResult:
    """Convert ``vault`` into the bundle ``out``, redoing only what changed since the last convert of it
    (``vault2okf.cache``); ``full`` ignores what the last convert left. ``kept``: what the last convert of this
    process left in memory, taken instead of the bundle's cache file while that is the file it saved, and
    replaced by this convert's (a watcher's). Either way the bundle is the one a full convert writes. ``removal``:
    whether the old generation is deleted before this returns (``kept`` deletes it on a thread instead). ``warm``
    (with ``kept``): run even where nothing changed, every note carried, so that ``kept`` holds the run's loops
    (``run.Loops``) and the next edit visits only what it touches (a watcher that started on a bundle up to date)."""
    with _collector_paused():
        try:
            return _convert(vault, out, config_path, force, full, kept, removal, warm and kept is not None)
        except OSError as error:
            if not is_disk_full(error):
                raise
            # the new bundle is built beside the old one, as big; a first one: the docs, okf.duckdb, the reports
            need = _tree_size(out) or 3 * _tree_size(vault) + (2 << 20)
            raise Vault2OkfError(disk_full_message(out, need, "a convert")) from error


def _tree_size(root: Path) -> int:
    """Bytes of the files under ``root`` (0 when it is missing): what a bundle of it takes, about."""
    total = 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic collector paused while a convert builds its many small objects, none of them in a cycle,
    and the cache it reads (millions of tuples). At Python's default it ran hundreds of times in a convert and
    took a tenth of it; even at a threshold of 20,000 it took a tenth of loading the cache of a 6.6k-note vault,
    and off, that convert's peak memory was the same (440 MiB). Workers forked meanwhile inherit the pause.
    Reference counting frees everything as before; the collector runs again as soon as the convert ends."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _convert(
    vault: Path,
    out: Path,
    config_path: Path | None,
    force: bool,
    full: bool,
    kept: Kept | None,
    removal: Removal,
    warm: bool = False,
) -> ConvertResult:
    if kept is not None:
        kept.used = False
    clock = Clock()
    started = time.time_ns()
    vault, out = vault.resolve(), out.resolve()
    config = load_config(vault, config_path)
    b.check_output(vault, out, force=force, listing=kept.listing if kept is not None else None)
    walk = kept.walk(vault, config.exclude) if kept is not None else walk_vault(vault, config.exclude)
    config = replace(config, base=vault_base([f.path for f in walk.notes]))
    clock.lap("walk")
    with b.bundle_lock(out, "converting"):  # one convert or index of a bundle at a time
        busy, listing = (kept.busy(), kept.listing) if kept is not None else ((), None)
        b.prepare_output(vault, out, force=force, busy=busy, listing=listing)
        key = cache_key(vault, vault.name, config)
        old, unchanged, notices = _previous(out, key, walk, kept, fresh=full or force)
        if old is not None and unchanged and not warm:
            clock.lap("check")
            last = old

            def load() -> LinkReport:
                return last.report(vault.name, walk)

            if kept is not None:  # a watcher's first convert found nothing to do: it keeps the bundle's cache
                kept.keep(out, key, old)
            return ConvertResult(
                out=out, notes=len(walk.notes), links=old.summary["links"], load_report=load, seconds=clock.total(),
                stages=clock.laps, unchanged=True, known_totals=old.summary["totals"], made=(),
            )  # fmt: skip
        spare = kept.spare if kept is not None else None  # emptied meanwhile, if it was: ``busy`` waited
        if kept is not None:
            kept.spare = None  # the stage now, whatever happens
        recycling = kept is not None
        try:
            run, stage, new_cache, files = _built(vault, out, walk, config, old, clock, key, started, recycling, spare)
        except WordsDamaged as damage:  # decoded when first needed (``suggest.StoredWords``): damaged after all
            notices = (*notices, f"the convert cache was damaged ({damage}); every note was converted again")
            run, stage, new_cache, files = _built(vault, out, walk, config, None, clock, key, started, recycling, None)
        waits = kept is None and removal is Removal.WAIT
        old_generation = b.swap_into_place(stage, out, remove=waits)  # `out` never missing; a kill in it is
        if kept is not None:  # finished by the next run
            sealed = (kept.listing, kept.files)  # the old generation's, sealed by this process
            kept.keep(out, key, new_cache)
            kept.listing, kept.files = b.listing(out, files), files
            if old_generation is not None:
                kept.put_aside(old_generation, stage, sealed, run.linked)
        elif old_generation is not None:
            b.remove_detached(old_generation)
    clock.lap("swap")
    report = run.report
    return ConvertResult(
        out=out, notes=len(walk.notes), links=len(run.records), load_report=lambda: report, seconds=clock.total(),
        stages=clock.laps, reused=run.reused, known_totals=report.to_json()["totals"], notices=notices,
        made=tuple(p for p in run.paths if p not in run.carried_set), paths=tuple(run.paths), bodies=run.bodies,
        held=(run, new_cache) if removal is Removal.DETACH else (),
    )  # fmt: skip


def _built(
    vault: Path,
    out: Path,
    walk: Walk,
    config: Config,
    old: ConvertCache | None,
    clock: Clock,
    key: str,
    started: int,
    recycling: bool,
    spare: b.Spare | None,
) -> tuple[Run, Path, ConvertCache, list[str]]:
    """The run (from ``old``), built into the staging folder with its cache, and the files it sealed: a new folder,
    or with ``recycling`` (a watcher) ``spare`` where ``bundle.recycle`` can take it; the folder removed if it
    fails."""
    run = Run(vault, out, walk, config, old, clock)
    stage = b.stage_path(out)
    try:
        stage, present = b.recycle(out, spare) if recycling else (b.staging_dir(out), set())
        new_cache = run.write(stage, key, started, present)
        b.finish(stage, present)
        files = b.seal(stage, _written(new_cache))
        new_cache.files[b.MARKER] = output_sig(stage / b.MARKER)
        save_cache(stage, new_cache, out)
        if not recycling:  # a watcher keeps its listing in memory (``Kept.listing``), made after the swap
            _save_listing(stage, files)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return run, stage, new_cache, files


def _save_listing(stage: Path, files: list[str]) -> None:
    """The sealed stage's folders (``bundle.Listing``), saved in it as late as can be (a folder changed shortly
    before is listed again at each check), for the next convert's check for foreign files."""
    found = b.listing(stage, files)
    if found is not None:
        b.save_listing(stage, found)


def _written(cache: ConvertCache) -> list[str]:
    """Every file a run put in its stage outside the state folder, from its cache: what ``bundle.tree_files`` of the
    stage lists, without listing it (0.2 s at 13k notes; a watcher's stage and a new one alike): each note's doc,
    the other files it wrote or linked (folder indexes, reports, SKILL.md, the database) and the attachments it
    copied or linked."""
    attachments = (f"{b.CONCEPTS}/{path}" for path in cache.attachments)
    return [*cache.docs, *(rel for rel in cache.files if rel != b.MARKER), *attachments]


def _previous(
    out: Path, key: str, walk: Walk, kept: Kept | None, *, fresh: bool
) -> tuple[ConvertCache | None, bool, tuple[str, ...]]:
    """What this convert starts from (``_last_cache``): none when ``fresh``; else what ``kept`` holds while it
    still describes the bundle, else the bundle's cache file."""
    if fresh:
        return None, False, ()
    held = kept.last(out, key) if kept is not None else None
    if held is not None:
        try:
            held.loaded  # noqa: B018 - in memory already, or (kept from the file) decoded and checked now
            return held, held.unchanged(walk, out), ()
        except CacheDamaged:
            pass  # then as any convert: the file, which says what is wrong with it
    return _last_cache(out, key, walk)


def _last_cache(out: Path, key: str, walk: Walk) -> tuple[ConvertCache | None, bool, tuple[str, ...]]:
    """The last convert's cache, checked against its digests before anything trusts it; whether nothing changed
    since (then only its body's bytes are hashed, for the report read from it; else the body is decoded now); and
    the notice of a damaged one, which counts as none."""
    try:
        old = load_cache(out, key)
        if old is None:
            return None, False, ()
        if old.unchanged(walk, out):
            if not old.intact():
                raise CacheDamaged(f"{cache_path(out)}: its body is not the one written")
            return old, True, ()
        old.loaded  # noqa: B018 - the body, decoded and checked against its digest
        return old, False, ()
    except CacheDamaged as damage:
        return None, False, (f"the convert cache was damaged ({damage}); every note was converted again",)
