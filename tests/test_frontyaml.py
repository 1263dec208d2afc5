"""``frontyaml.dump`` writes what ``yaml.dump`` (libyaml's emitter) writes, byte for byte: on thousands of
random frontmatters made of the strings that decide the emitter's style (indicators, YAML 1.1 booleans and
numbers, colons, hashes, quotes, spaces at the ends, non-ASCII, emoji, control characters, long lines) and on
every doc of the shared vaults. Where it would write something else it must hand the mapping to ``yaml.dump``
instead, so the test compares only outputs."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pytest
import yaml

from vault2okf import bundle, frontyaml
from vault2okf.convert import convert

VAULTS = Path(__file__).resolve().parents[2] / "shared" / "vaults"
TRICKY = [
    "",
    " ",
    "a",
    "Session 4",
    "yes",
    "No",
    "on",
    "OFF",
    "y",
    "n",
    "true",
    "False",
    "null",
    "Null",
    "~",
    "0",
    "-5",
    "1_000",
    "0x1F",
    "0o17",
    "1:30",
    "1.5",
    "1e3",
    ".inf",
    "-.Inf",
    ".nan",
    "2024-01-05",
    "2024-1-5 10:00",
    "<<",
    "=",
    "- x",
    "-x",
    "-",
    "?",
    "? x",
    ":",
    ": x",
    "a:b",
    "a: b",
    "a:",
    "a #b",
    "a#b",
    "#tag",
    "[[Note]]",
    "[x]",
    "{x}",
    "x, y",
    "a,b",
    "&anchor",
    "*alias",
    "!tag",
    "|",
    ">",
    "'quoted'",
    '"double"',
    "it's",
    "%x",
    "@x",
    "`x`",
    "--- x",
    "... x",
    "---",
    "a ",
    " a",
    "  ",
    "Café",
    "naïve — dash",
    "日本語",
    "👍 or 👎",
    "tab\there",
    "line\nbreak",
    "nel\x85x",
    "sep\u2028x",
    "bom\ufeffx",
    "ctl\x07x",
    "back\\slash",
    "a/b.md",
    "obsidian://open?vault=v&file=a%20b",
    "x" * 999,
    "x" * 1001,
    "word " * 300,
    "'",
    "''",
    "a'b'c",
    "%",
]
KEYS = ["type", "title", "tags", "a b", "Aliases", "yes", "1", "k: v", "#k", "", "-", "x" * 101, "é"]


def _value(rng: random.Random, depth: int = 0) -> object:
    roll = rng.random()
    if roll < 0.45:
        return rng.choice(TRICKY)
    if roll < 0.55:
        return rng.choice([None, True, False, 0, -3, 10**20, 1.5, dt.date(2024, 2, 29), dt.datetime(2024, 1, 5, 10)])
    if roll < 0.8:
        return [_value(rng, depth + 1) if depth < 1 and rng.random() < 0.1 else rng.choice(TRICKY)
                for _ in range(rng.randint(0, 4))]  # fmt: skip
    if depth >= 2:
        return rng.choice(TRICKY)
    return {rng.choice(KEYS + TRICKY[:20]): _value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def _yaml(mapping: dict) -> str:
    return yaml.dump(mapping, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True, width=4096)


def test_random_frontmatters_are_written_as_yaml_dump_writes_them() -> None:
    rng = random.Random(7)
    for _ in range(4000):
        mapping = {rng.choice(KEYS + TRICKY): _value(rng) for _ in range(rng.randint(0, 6))}
        assert frontyaml.dump(mapping) == _yaml(mapping), mapping


def test_the_common_shapes_take_the_fast_path() -> None:
    """The shapes most docs have are written here, not handed over (else the module gains nothing)."""
    mapping = {"type": "Session", "title": "Session 4: the Tower", "description": "", "tags": ["a", "b"],
               "aliases": [], "date": dt.date(2024, 1, 5), "n": 3, "draft": False,
               "wikilinks": {"location": "[[Esa Themar]]", "cast": ["[[A]]", "[[B]]"]}}  # fmt: skip
    text = "".join(frontyaml._entry(k, v, "") for k, v in mapping.items())  # raises where it would hand over
    assert text == _yaml(mapping)


@pytest.mark.parametrize("vault", ["thellade", "daggerheart", "de-wiki"])
def test_every_doc_of_a_shared_vault_has_the_yaml_dump_frontmatter(
    vault: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not (VAULTS / vault).is_dir():
        pytest.skip(f"{VAULTS / vault} not present")
    seen: list[dict] = []
    render = bundle.render_doc

    def keep(front: dict, body: str) -> str:
        seen.append(dict(front))
        return render(front, body)

    monkeypatch.setattr(bundle, "render_doc", keep)
    monkeypatch.setenv("VAULT2OKF_WORKERS", "1")  # the frontmatters are seen in this process
    convert(VAULTS / vault, tmp_path / "bundle")
    assert seen
    assert [frontyaml.dump(front) for front in seen] == [_yaml(front) for front in seen]
