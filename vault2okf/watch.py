"""``watch``: keep a bundle (and, with ``--index``, its index) following the vault as it is edited.

One full ``convert`` at the start, then one rebuild per burst of file events (``watchfiles``; a burst ends
after ``--debounce`` ms without events). A rebuild is a whole ``convert``: built beside the bundle and
swapped in atomically (docs/adr-002-bundle-swap.md), so the bundle is always one whole conversion, never a
mix. With an indexer (injected by the ``watch`` command, ``vault2okf/cli/watch.py``: the library does not import
the retriever), the index is synced after each rebuild; it embeds only the notes whose text changed. After the first
index, what an edit's index opens (Chroma's vector index, the embedder: ``warmer``) is opened once, so the first
edit costs what the next ones do.

A rebuild that fails (a broken config, another run holding the bundle lock, a bug) is one report line;
the watcher keeps going and retries at the next change. A note that cannot be parsed is converted anyway
and its problem is named on the line. SIGINT/SIGTERM stop the watcher after the rebuild in progress (the
bundle stays whole); a second signal interrupts the rebuild, which leaves the previous bundle in place.
"""

from __future__ import annotations

import datetime as dt
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from vault2okf.config import load_config
from vault2okf.convert import ConvertResult, Kept, convert
from vault2okf.errors import Vault2OkfError
from vault2okf.protocol import database
from vault2okf.walk import SKIPPED_DIRS, Walked, is_excluded

Indexer = Callable[..., Any]  # retriever.index.index_bundle(bundle, embedder_name=, device=, progress=)
Warmer = Callable[..., Any]  # retriever.index.warm_index(bundle, embedder_name=, device=): what an edit's index opens
Echo = Callable[[str], None]
SHOWN = 4  # paths named per kind of change on one line
CHECK_AFTER = 2.0  # seconds without a rebuild after one whose walk was patched, before the vault is walked whole


@dataclass(frozen=True)
class Changes:
    """What one rebuild changed in the bundle, by vault path (a rename: same body under a new path)."""

    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed or self.renamed)

    def describe(self) -> str:
        if not self:
            return "no note changed"
        parts = [
            _named("changed", self.changed),
            _named("added", self.added),
            _named("renamed", [f"{a} -> {b_}" for a, b_ in self.renamed]),
            _named("removed", self.removed),
        ]
        return "; ".join(p for p in parts if p)


def _named(kind: str, paths: Iterable[str]) -> str:
    items = list(paths)
    if not items:
        return ""
    more = f" (+{len(items) - SHOWN} more)" if len(items) > SHOWN else ""
    return f"{kind} {', '.join(items[:SHOWN])}{more}"


def bundle_notes(out: Path, only: Iterable[str] | None = None) -> dict[str, str]:
    """vault path -> content hash of the body, for the notes of the bundle at ``out`` now ({} when none);
    ``only``: for those notes alone."""
    path = database(out)
    if not path.is_file():
        return {}
    query, args = "SELECT vault_path, md5(body) FROM concepts", []
    if only is not None:
        query, args = f"{query} WHERE list_contains(?::VARCHAR[], vault_path)", [list(only)]
    try:
        with duckdb.connect(str(path), read_only=True) as con:
            rows = con.execute(query, args).fetchall()
    except duckdb.Error:
        return {}
    return {str(p): str(h) for p, h in rows}


def notes_after(out: Path, before: dict[str, str], result: ConvertResult, kept: bool) -> dict[str, str]:
    """``bundle_notes(out)`` after ``result``, read only for the notes it made again where ``before`` is the
    bundle it started from (``kept``: this process wrote it last): a carried note's row is the one before, a note
    made again has the body the convert hashed as DuckDB's ``md5`` does (``ConvertResult.bodies``), else read."""
    if not kept or result.made is None or (result.paths is None and not result.unchanged):
        return bundle_notes(out)
    if result.unchanged:
        return before
    assert result.paths is not None
    made, bodies = set(result.made), result.bodies
    if bodies is not None and made.issubset(bodies) and before.keys() == set(result.paths):  # the same notes
        after = dict(before)
        after.update((p, bodies[p]) for p in result.made)
        return after
    after = {p: before[p] for p in result.paths if p not in made and p in before}
    if len(after) + len(made) != len(result.paths):  # a carried note the last read did not have: read them all
        return bundle_notes(out)
    if bodies is not None and made.issubset(bodies):
        after.update((p, bodies[p]) for p in result.made)
    else:
        after.update(bundle_notes(out, result.made) if made else {})
    return after


def diff_notes(before: dict[str, str], after: dict[str, str], only: Iterable[str] | None = None) -> Changes:
    """What changed from ``before`` to ``after``; ``only``: the notes whose bodies may differ, where every other
    note's is the one before (``notes_after`` of a convert that made them alone)."""
    if only is not None and before.keys() == after.keys():
        return Changes(changed=tuple(sorted(p for p in set(only) if before[p] != after[p])))
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(p for p in set(before) & set(after) if before[p] != after[p])
    renamed = []
    for old in list(removed):  # a removed note whose body reappears under one added path: a rename
        match = [new for new in added if after[new] == before[old]]
        if len(match) == 1:
            renamed.append((old, match[0]))
            removed.remove(old)
            added.remove(match[0])
    return Changes(tuple(added), tuple(changed), tuple(removed), tuple(renamed))


def vault_filter(vault: Path, exclude: tuple[str, ...]) -> Callable[[Any, str], bool]:
    """Events worth a rebuild: files the walk would read (not hidden, not under .obsidian/.git/.trash or an
    excluded folder); ``vault2okf.toml`` counts, since it changes the conversion."""
    root = vault.resolve()

    def keep(_change: Any, path: str) -> bool:
        try:
            rel = Path(path).resolve().relative_to(root).as_posix()
        except ValueError:
            return False
        parts = rel.split("/")
        if any(p in SKIPPED_DIRS or (p.startswith(".") and p != ".md") for p in parts):
            return False
        return not any(is_excluded("/".join(parts[: i + 1]), p, exclude) for i, p in enumerate(parts))

    return keep


def walk_filter(vault: Path) -> Callable[[Any, str], bool]:
    """Events the walk may see, worth a rebuild or not (``vault_filter``): any path of the vault not inside a
    hidden folder (.obsidian, .git, .trash...), which the walk never enters. A hidden file or an excluded one
    is named in the walk (skipped, excluded), so a watcher that patches its last walk must know it changed."""
    root = str(vault.resolve()) + os.sep

    def keep(_change: Any, path: str) -> bool:
        if not path.startswith(root):
            return False
        folders = path[len(root) :].split(os.sep)[:-1]
        return not any(p.startswith(".") and p != ".md" for p in folders)

    return keep


@dataclass(frozen=True)
class Batch:
    """One burst of file events: the paths they named, and whether one of them is worth a rebuild."""

    events: int
    paths: frozenset[str]
    rebuild: bool


class Watcher:
    """The rebuild loop; ``run`` returns when ``stop`` is set (the signal handlers set it)."""

    def __init__(
        self,
        vault: Path,
        out: Path,
        *,
        config_path: Path | None = None,
        force: bool = False,
        indexer: Indexer | None = None,
        index_options: dict[str, Any] | None = None,
        warmer: Warmer | None = None,
        debounce_ms: int = 300,
        echo: Echo,
    ) -> None:
        self.vault, self.out = vault.resolve(), out.resolve()
        self.config_path, self.force = config_path, force
        self.indexer, self.index_options = indexer, dict(index_options or {})
        self.warmer = warmer
        self.warmed: Any = None  # what ``warmer`` opened after the first index, held while the watch runs
        self.debounce_ms = debounce_ms
        self.echo = echo
        self.stop = threading.Event()
        self.busy = False
        self.rebuilds = 0
        self.problems: set[tuple[str, str]] = set()
        self.kept = Kept(events=True)  # the last convert's state, kept in memory for the next one
        self.bodies: dict[str, str] = {}  # bundle_notes after the last convert
        self.quiet: set[str] = set()  # paths of bursts not worth a rebuild alone (hidden, excluded files)
        self.unchecked: float | None = None  # when the last rebuild whose walk was a patch ended (``check_walk``)

    def start(self) -> None:
        """The first full convert (and index); errors here are the command's errors (exit 1)."""
        started = time.perf_counter()
        before = bundle_notes(self.out)
        result = convert(self.vault, self.out, config_path=self.config_path, force=self.force, kept=self.kept)
        if result.unchanged:  # nothing to do: a run anyway, every note carried, for the loops the next edit follows
            convert(self.vault, self.out, config_path=self.config_path, kept=self.kept, warm=True)
        self.problems = _problems(result)
        index = self._index() + self._warm() if self.indexer else ""
        self.bodies = bundle_notes(self.out)
        changes = diff_notes(before, self.bodies)
        seconds = time.perf_counter() - started
        self.echo(f"{now()} start: {_summary(result, changes, index, seconds, self.problems)}")

    def run(self) -> None:
        """Watch first (so that no edit made during the first convert is missed), convert, then rebuild once
        per burst of events until ``stop`` is set. Events that arrive during a rebuild make the next one."""
        exclude = load_config(self.vault, self.config_path).exclude if self._config_ok() else ()
        batches: queue.Queue[Batch] = queue.Queue()
        ready = threading.Event()
        failed: list[BaseException] = []
        thread = threading.Thread(
            target=self._events, args=(exclude, batches, ready, failed), name="vault2okf-watch", daemon=True
        )
        thread.start()
        try:
            while not ready.wait(0.1):
                if failed or not thread.is_alive():
                    raise Vault2OkfError(f"cannot watch {self.vault}: {_error(failed[0]) if failed else 'stopped'}")
            self.start()
            self.echo(f"{now()} watching {self.vault} -> {self.out} (Ctrl-C to stop)")
            while not self.stop.is_set():
                try:
                    batch = batches.get(timeout=0.2)  # short waits: signals are handled in this thread
                except queue.Empty:
                    if failed:
                        raise Vault2OkfError(f"watching {self.vault} failed: {_error(failed[0])}") from None
                    if self.unchecked is not None and time.monotonic() - self.unchecked >= CHECK_AFTER:
                        self.check_walk(batches.empty)
                    continue
                events, paths, due = batch.events, set(batch.paths), batch.rebuild
                while not batches.empty():  # bursts that queued up during a rebuild: one rebuild for all
                    more = batches.get()
                    events, due = events + more.events, due or more.rebuild
                    paths |= more.paths
                if not due:  # none worth a rebuild: the next rebuild's walk looks at them again
                    self.quiet |= paths
                    continue
                self.rebuild(events, paths)
        finally:
            self.stop.set()
            thread.join(timeout=5)
            self.kept.close()  # the old generations deleted before the watch ends

    def _events(
        self, exclude: tuple[str, ...], batches: queue.Queue[Batch], ready: threading.Event, failed: list[BaseException]
    ) -> None:
        from watchfiles import watch

        step = max(1, self.debounce_ms)
        worth = vault_filter(self.vault, exclude)
        try:
            for batch in watch(
                self.vault,
                watch_filter=walk_filter(self.vault),
                step=step,  # a burst ends after this long without events...
                debounce=max(20 * step, 2000),  # ...or after this long at most
                stop_event=self.stop,
                rust_timeout=100,  # the first timeout says the watcher is running
                yield_on_timeout=True,
                raise_interrupt=False,
            ):
                ready.set()
                if batch:
                    paths = frozenset(path for _, path in batch)
                    batches.put(Batch(len(batch), paths, any(worth(change, path) for change, path in batch)))
        except Exception as exc:  # noqa: BLE001 - handed to the main thread, which says so and stops
            failed.append(exc)

    def rebuild(self, events: int = 0, paths: Iterable[str] | None = None) -> bool:
        """Convert (and index) again; one line either way. False when the rebuild failed. ``paths``: the paths
        the file events named (absolute), so that the walk looks at those alone (``walk.Walked.patch``); None:
        not known, the whole vault is walked."""
        self.kept.note_changes(None if paths is None else {*paths, *self.quiet})
        self.quiet.clear()
        self.rebuilds += 1
        head = f"{now()} rebuild {self.rebuilds} ({events} file event{'s' * (events != 1)}):"
        started = time.perf_counter()
        self.busy = True
        try:
            before = self.bodies
            try:
                result = convert(self.vault, self.out, config_path=self.config_path, force=self.force, kept=self.kept)
            except Exception as exc:  # noqa: BLE001 - a failed rebuild is a report line, never the end of the watch
                self.echo(f"{head} convert failed, bundle unchanged: {_error(exc)}; retrying at the next change")
                return False
            self.unchecked = time.monotonic() if self.kept.patched else None
            self.bodies = notes_after(self.out, before, result, self.kept.used)
            made = result.made if self.kept.used and result.bodies is not None else None
            changes = diff_notes(before, self.bodies, made)
            problems = _problems(result)
            new = problems - self.problems
            self.problems = problems
            index = self._index() if self.indexer and changes else ""
            seconds = time.perf_counter() - started
            self.echo(f"{head} {_summary(result, changes, index, seconds, new)}")
            return True
        finally:
            self.busy = False

    def check_walk(self, quiet: Callable[[], bool] = lambda: True) -> bool:
        """The vault walked whole, a while after a rebuild whose walk was the last one patched with the paths
        its file events named: an event the watcher missed (the kernel's queue overflowed, and ``watchfiles``
        drops the notice that says so) is found, and rebuilt for now rather than at the next edit. The whole walk
        is the one the next rebuild patches. ``quiet``: are no events waiting (they make the next rebuild)?
        True when a rebuild was due and done."""
        self.unchecked = None
        last = self.kept.walked
        if last is None:
            return False
        known = last.patch(self.quiet) if self.quiet else last.walk  # the hidden and excluded files seen since
        try:
            whole = Walked(self.vault, last.exclude)
        except Vault2OkfError:
            return False
        self.kept.walked, self.kept.patched = whole, False
        if known is None or whole.walk == known or not quiet():  # None: not known; the next rebuild has it
            return False
        self.echo(f"{now()} the vault changed with no file event for it (events were missed): rebuilding")
        return self.rebuild()

    def _index(self) -> str:
        assert self.indexer is not None
        started = time.perf_counter()
        try:
            r = self.indexer(self.out, progress=False, **self.index_options)
        except Exception as exc:  # noqa: BLE001 - the bundle is fine; the index catches up at the next rebuild
            return f"; index failed: {_error(exc)}"
        took = time.perf_counter() - started
        return f"; index {took:.2f}s ({r.added} embedded, {r.removed} removed, {r.chunks} chunks)"

    def _warm(self) -> str:
        """After the first index: open what an edit's index opens (Chroma's vector index, the embedder), so that
        the first edit costs what the next ones do. A failure costs that edit the time, nothing else: a note."""
        if self.warmer is None:
            return ""
        started = time.perf_counter()
        try:
            self.warmed = self.warmer(self.out, **self.index_options)
        except Exception as exc:  # noqa: BLE001 - the index opens at the first edit instead
            return f"; index not opened ahead ({_error(exc)}): the first edit opens it"
        return f"; index opened {time.perf_counter() - started:.2f}s" if self.warmed is not None else ""

    def _config_ok(self) -> bool:
        try:
            load_config(self.vault, self.config_path)
        except Vault2OkfError:
            return False
        return True

    @contextmanager
    def signals(self) -> Iterator[None]:
        """SIGINT/SIGTERM: stop after the rebuild in progress; a second one interrupts it (KeyboardInterrupt)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handle(signum: int, _frame: Any) -> None:
            if self.stop.is_set():
                raise KeyboardInterrupt
            self.stop.set()
            if self.busy:
                self.echo(f"{now()} stopping after this rebuild (signal again to interrupt it)")

        old = {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, h in old.items():
                signal.signal(s, h)


def _problems(result: ConvertResult) -> set[tuple[str, str]]:
    return {(path, f"{p.kind}: {p.message}") for path, p in result.report.problems}


def _summary(
    result: ConvertResult, changes: Changes, index: str, seconds: float, problems: set[tuple[str, str]]
) -> str:
    totals = result.totals["by_status"]
    shown = sorted(problems)[:2]
    problem = "".join(f"; problem in {p}: {_clip(m)}" for p, m in shown)
    if len(problems) > len(shown):
        problem += f" (+{len(problems) - len(shown)} more in {result.out / 'link-health.md'})"
    return (
        f"{changes.describe()} -> {result.notes} notes, {totals['broken']} broken links, "
        f"{len(result.report.problems)} problem(s); convert {result.seconds:.2f}s{index}; {seconds:.2f}s in all"
        f"{problem}"
    )


def _clip(text: str, width: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _error(exc: BaseException) -> str:
    if isinstance(exc, Vault2OkfError | OSError):
        return _clip(str(exc), 300)
    return _clip(f"{type(exc).__name__}: {exc}", 300)


def now() -> str:
    return dt.datetime.now().strftime("%H:%M:%S")
