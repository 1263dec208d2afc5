"""A `convert` and an `index` swapping the bundle under a running `vault2okf serve` while clients search it: every
answer is the one of a whole bundle version (old, converted, or converted and indexed), never a mix, and
`/health` says which generation is served."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from serve_checks import VAULT, serving

pytestmark = pytest.mark.slow
QUESTION = "What does the Zebra Codex say about the Ashfall archive?"
NEW_NOTE = """# Zebra Codex

The Zebra Codex is the sealed archive of [[Ashfall]]: a zebra-striped ledger of every contract the Ashfall PMC
ever signed, kept by [[Vann Solis]] in the vault under the Ashfall archive.
"""


def in_process(bundle: Path) -> list[tuple[str, float, str]]:
    """What a fresh in-process search gives for QUESTION on the bundle as it is now."""
    from retriever.retrieve import DEFAULT_SPEC, Retriever

    hits = Retriever.open(bundle).search(QUESTION, DEFAULT_SPEC).hits
    return [(h.note_id, h.score, str(h.via)) for h in hits]


def test_convert_and_index_under_load_serve_old_or_new_never_a_mix(tmp_path: Path) -> None:
    from retriever.index import index_bundle
    from retriever.serve.library import generation_of, stamps_of
    from vault2okf.convert import convert

    vault = tmp_path / "vault"
    shutil.copytree(VAULT, vault)
    bundle = tmp_path / "children-of-ash"
    convert(vault, bundle)
    index_bundle(bundle, embedder_name="minilm", progress=False)
    versions = [in_process(bundle)]
    with serving([bundle], "--llm", "extract", errlog=tmp_path / "err.txt") as server:
        first = server.get("/health")["bundles"][0]["generation"]
        answers: list[Any] = []
        generations: list[str] = []
        stop = threading.Event()

        def client() -> None:
            while not stop.is_set():
                try:
                    hits = server.post("/search", {"question": QUESTION})["hits"]
                    answers.append([(h["note_id"], h["score"], h["via"]) for h in hits])
                except Exception as e:  # noqa: BLE001 - a failed request is asserted against below
                    answers.append(e)

        def health() -> None:
            while not stop.is_set():
                generations.append(server.get("/health")["bundles"][0]["generation"])
                time.sleep(0.05)

        threads = [threading.Thread(target=client) for _ in range(4)] + [threading.Thread(target=health)]
        for t in threads:
            t.start()
        try:
            time.sleep(1)
            (vault / "Lore").mkdir()
            (vault / "Lore" / "Zebra Codex.md").write_text(NEW_NOTE, "utf-8")
            convert(vault, bundle)  # the swap: a new okf.duckdb, the old index carried over
            time.sleep(2)
            versions.append(in_process(bundle))
            index_bundle(bundle, embedder_name="minilm", progress=False)  # the new note's chunks
            versions.append(in_process(bundle))
            final = generation_of(stamps_of(bundle))
            deadline = time.monotonic() + 60
            while server.get("/health")["bundles"][0]["generation"] != final and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(1)
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert server.get("/health")["bundles"][0]["generation"] == final != first
    failures = [a for a in answers if isinstance(a, Exception)]
    assert failures == []
    assert "Lore/Zebra Codex" in [n for n, _, _ in versions[2]]
    assert "Lore/Zebra Codex" not in [n for n, _, _ in versions[0]]
    mixed = [a for a in answers if a not in versions]
    assert mixed == [], f"{len(mixed)} of {len(answers)} answers match no whole bundle version"
    assert answers[0] == versions[0] and answers[-1] == versions[2]
    assert generations[0] == first and generations[-1] == final
    assert len(answers) > 20
