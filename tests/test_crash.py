"""kill -9 at random points of real `vault2okf convert` and `vault2okf index` runs (subprocesses of the CLI).

Every kill must leave a usable bundle (the previous one or the new one), and after a rerun the index must
hold exactly the chunks of a clean index of the same bundle: the same chunk ids, content hashes and vectors.
Kill points are seeded. A convert is killed after a random share of the measured length of one run (walk,
parse, write, seal, swap). An index is killed either after a random delay (imports, model load) or a moment
after its progress bar reaches a random share of its chunks (the embedding, in batches of 8: many writes),
so the kills land where they should however loaded the machine is.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import numpy as np
import pytest
from bundle_checks import database_rows, tree_hashes

from retriever.errors import RetrieverError
from retriever.index import bundle_id, read_index_info
from retriever.store import ChunkStore, collection_name, open_client
from vault2okf import bundle as b
from vault2okf.convert import convert

VAULTS = Path(__file__).resolve().parents[2] / "shared" / "vaults"
CLI = Path(sys.executable).parent / "vault2okf"
KILLS = 20
INDEX_KILLS = 15  # each index run loads the model first: fewer runs, the same kinds of kill points
PER_ROUND = 5  # kills between two reruns to the end
BATCH = "8"  # chunks per write while embedding: many points to be killed between
ENV = {
    **os.environ,
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "VAULT2OKF_EMBED_BATCH": BATCH,
    "VAULT2OKF_PROGRESS": "1",  # the kill points are read from the embed bar, which a pipe would otherwise not get
}

pytestmark = pytest.mark.slow


def cli(*args: object) -> list[str]:
    return [str(CLI), *(str(a) for a in args)]


def run_to_end(*args: object) -> float:
    started = time.monotonic()
    done = subprocess.run(cli(*args), env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return time.monotonic() - started


def run_and_kill(args: list[str], delay: float, env: dict[str, str] = ENV) -> bool:
    """Start the command, kill -9 it after `delay` seconds; True when it was still running (a real kill)."""
    process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        process.wait(timeout=delay)
        return False
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        return True


def index_and_kill(bundle: Path, rng: random.Random) -> bool:
    """Index with the progress bar on and kill -9 the run: half the time in the imports or the model load (after
    a random delay, or as the bar first shows if that comes sooner), half the time in the embedding, a moment
    after the bar reaches a random share of its chunks (so the kill lands between two writes or inside one,
    whatever the machine's load).
    True when the run was still going when killed."""
    args = cli("index", bundle, "--embedder", "minilm")
    process = subprocess.Popen(args, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    reached = threading.Event()
    share = rng.uniform(0.0, 0.95) if rng.random() < 0.5 else None
    watcher = threading.Thread(target=_watch_bar, args=(process, share, reached), daemon=True)
    watcher.start()
    reached.wait(timeout=rng.uniform(0.5, 8.0) if share is None else 600)  # no share: the bar's start at the latest
    time.sleep(rng.uniform(0.0, 0.3))
    killed = process.poll() is None
    if killed:
        os.kill(process.pid, signal.SIGKILL)
    process.wait()
    watcher.join()
    return killed


def _watch_bar(process: subprocess.Popen, share: float | None, reached: threading.Event) -> None:
    """Read the run's stderr; set `reached` once the tqdm bar shows `share` of its chunks done (or at the end).
    With no share: as soon as the bar shows at all, the imports and the model load being over (a kill meant for
    them lands there at the latest, however fast the machine runs just then)."""
    assert process.stderr is not None
    seen = b""
    while chunk := os.read(process.stderr.fileno(), 4096):
        seen = (seen + chunk)[-200:]
        bars = re.findall(rb"(\d+)/(\d+) \[", seen)
        if bars and (share is None or int(bars[-1][0]) >= share * int(bars[-1][1])):
            reached.set()
    reached.set()


def processes_naming(path: Path) -> list[int]:
    """Pids of the processes whose command line names ``path`` (a killed convert's forked workers would)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(path).encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def assert_no_workers_left(bundle: Path) -> None:
    """A killed convert's workers die with it (they would go on writing into its staging folder)."""
    deadline = time.monotonic() + 5
    while (left := processes_naming(bundle)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"processes of the killed convert still running: {left}"


def assert_usable(bundle: Path) -> None:
    """The OKF tree, a database that opens, the link-health report and vault2okf's marker are all there."""
    assert (bundle / "concepts" / "index.md").is_file(), sorted(p.name for p in bundle.parent.iterdir())
    with duckdb.connect(str(bundle / "okf.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM concepts").fetchone()[0] > 0
    assert (bundle / "link-health.md").is_file() and (bundle / "link-health.json").is_file()
    assert b.read_marker(bundle) is not None


def stored_chunks(bundle: Path) -> dict[str, tuple[str, np.ndarray]]:
    """chunk id -> (content hash, vector) of the bundle's MiniLM index, read through the retriever's store."""
    from chromadb.api.client import SharedSystemClient

    SharedSystemClient.clear_system_cache()  # another process wrote the files: read them afresh
    client = open_client(bundle)
    try:
        name = read_index_info(bundle).collection  # a copied bundle keeps the collection it was indexed into
    except RetrieverError:
        name = collection_name(bundle_id(bundle), "minilm")
    if name not in {c.name for c in client.list_collections()}:
        return {}
    rows = ChunkStore(client, name).rows(["metadatas", "embeddings"])
    found = {row.chunk_id: ((row.metadata or {})["content_hash"], row.embedding) for row in rows}
    SharedSystemClient.clear_system_cache()
    return found


def assert_same_chunks(got: dict[str, tuple[str, np.ndarray]], clean: dict[str, tuple[str, np.ndarray]]) -> None:
    assert sorted(got) == sorted(clean), f"missing {sorted(set(clean) - set(got))[:5]}, extra {set(got) - set(clean)}"
    assert {cid: h for cid, (h, _) in got.items()} == {cid: h for cid, (h, _) in clean.items()}
    assert all(np.allclose(got[cid][1], clean[cid][1], atol=1e-3) for cid in clean)


def assert_consistent_part(got: dict[str, tuple[str, np.ndarray]], clean: dict[str, tuple[str, np.ndarray]]) -> None:
    """What an interrupted index holds is a part of the clean one: no chunk that should not be there."""
    assert set(got) <= set(clean) and all(got[cid][0] == clean[cid][0] for cid in got)


@pytest.fixture(scope="module")
def clean_index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, tuple[str, np.ndarray]], float]:
    """A converted blades-of-vengeance bundle, its clean index, and how long one full index run took."""
    vault = VAULTS / "blades-of-vengeance"
    if not vault.is_dir():
        pytest.skip(f"{vault} not present")
    bundle = tmp_path_factory.mktemp("clean") / "bundle"
    run_to_end("convert", vault, "-o", bundle)
    seconds = run_to_end("index", bundle, "--embedder", "minilm", "--no-progress")
    return bundle, stored_chunks(bundle), seconds


def test_index_killed_at_random_points_resumes_to_exactly_the_clean_chunks(clean_index, tmp_path: Path) -> None:
    template, clean, seconds = clean_index
    rng = random.Random(13)
    kills, finished, rounds = 0, 0, 0
    while kills < INDEX_KILLS:
        bundle = tmp_path / f"round-{rounds}" / "bundle"  # a fresh, never-indexed copy of the same bundle
        shutil.copytree(template, bundle, ignore=shutil.ignore_patterns("chroma", "index.json"))
        for _ in range(PER_ROUND):  # kill it, then kill the run that resumes it, ...
            killed = index_and_kill(bundle, rng)
            kills, finished = kills + killed, finished + (not killed)
            assert_usable(bundle)
            assert_consistent_part(stored_chunks(bundle), clean)
        run_to_end("index", bundle, "--embedder", "minilm", "--no-progress")  # the rerun
        assert_same_chunks(stored_chunks(bundle), clean)
        rounds += 1
        assert rounds <= 2 * INDEX_KILLS // PER_ROUND, f"only {kills} kills in {rounds} rounds: the delays are too long"
    print(f"index: {kills} kills, {finished} runs done before their kill, {rounds} reruns, one run {seconds:.1f}s")


def test_convert_killed_at_random_points_leaves_a_usable_bundle_and_its_index(clean_index, tmp_path: Path) -> None:
    """Half the killed runs are full converts (``--full``), half incremental ones after a note was edited
    (the edit toggles, so the bundle stays that of the vault or of the vault plus one line): both paths are
    killed in their write, seal and swap. Each kind's kill points are spread over its own measured length.
    Every other pair of runs spreads its notes over two forked workers (``VAULT2OKF_WORKERS=2``), which must
    die with the killed convert."""
    template, clean, _ = clean_index
    vault = tmp_path / "work" / "vault"
    shutil.copytree(VAULTS / "blades-of-vengeance", vault)
    edited = sorted(vault.rglob("*.md"))[len(list(vault.rglob("*.md"))) // 2]
    original = edited.read_bytes()
    bundle = tmp_path / "out" / "bundle"  # alone in its folder: leftovers beside it would show
    shutil.copytree(template, bundle)

    def toggle() -> None:
        edited.write_bytes(original + b"\nEdited.\n" if edited.read_bytes() == original else original)

    started = time.monotonic()
    run_to_end("convert", vault, "-o", bundle, "--full")
    seconds = {"full": time.monotonic() - started}
    toggle()
    started = time.monotonic()
    run_to_end("convert", vault, "-o", bundle)
    seconds["incremental"] = time.monotonic() - started
    rng = random.Random(13)
    kills = attempts = left_over = index_aside = 0
    while kills < KILLS:
        late = rng.random() < 0.5  # half the kills in the last stretch: write, seal, swap
        delay = rng.uniform(0.6, 1.05) if late else rng.uniform(0.05, 1.0)
        kind = "full" if attempts % 2 == 0 else "incremental"
        if kind == "incremental":
            toggle()
        args = ("--full",) if kind == "full" else ()
        env = {**ENV, "VAULT2OKF_WORKERS": "2" if attempts // 2 % 2 else "1"}
        kills += run_and_kill(cli("convert", vault, "-o", bundle, *args), delay * seconds[kind], env)
        attempts += 1
        assert_no_workers_left(bundle)
        assert_usable(bundle)  # the previous bundle or the new one, never none
        left_over += any(p.name.startswith(".bundle.tmp-") for p in bundle.parent.iterdir())
        index_aside += not (bundle / b.STATE / "index.json").is_file()
        run_to_end("convert", vault, "-o", bundle)  # the rerun finishes what the killed one left
        assert_usable(bundle)
        reference = tmp_path / "work" / "reference"
        shutil.rmtree(reference, ignore_errors=True)
        convert(vault, reference, full=True)  # and what it left is the bundle of the vault as it is now
        skip = ("okf.duckdb", b.STATE)
        assert tree_hashes(bundle, skip=skip) == tree_hashes(reference, skip=skip)
        assert database_rows(bundle) == database_rows(reference)
        assert sorted(p.name for p in bundle.parent.iterdir()) == ["bundle"]
        assert_same_chunks(stored_chunks(bundle), clean)  # the index survived, whole
        assert attempts <= 3 * KILLS, f"only {kills} kills in {attempts} runs: the delays are too long"
    edited.write_bytes(original)
    run_to_end("convert", vault, "-o", bundle)
    run_to_end("index", bundle, "--embedder", "minilm", "--no-progress")
    assert_same_chunks(stored_chunks(bundle), clean)
    print(
        f"convert: {kills} kills in {attempts} runs ({left_over} left a stage or old bundle beside, {index_aside} "
        f"the index outside the bundle), one run {seconds['full']:.1f}s full, {seconds['incremental']:.1f}s "
        "incremental"
    )
