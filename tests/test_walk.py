"""``[walk] exclude`` matching: the compiled matcher the walk uses agrees with the rule as written (a pattern is the
path, the name, or an ``fnmatch`` glob of the path), on random patterns and paths built from the characters that
decide it."""

from __future__ import annotations

import fnmatch
import random

from vault2okf.walk import is_excluded

PIECES = ["a", "b", "Templates", "_t", ".x", "*", "?", "[ab]", "[!a]", "/", " ", "é", "**", "|", "(", ")", "\\", "+"]


def oracle(path: str, name: str, exclude: list[str]) -> bool:
    return any(path == e.strip("/") or name == e or fnmatch.fnmatchcase(path, e) for e in exclude)


def test_the_compiled_matcher_agrees_with_the_rule() -> None:
    rng = random.Random(14)
    checked = matched = 0
    for _ in range(400):
        exclude = ["".join(rng.choices(PIECES, k=rng.randint(0, 4))) for _ in range(rng.randint(0, 4))]
        for _ in range(25):
            plain = [p for p in PIECES if p not in ("*", "?", "[ab]", "[!a]", "**")]
            path = "".join(rng.choices(plain, k=rng.randint(1, 5))).strip("/") or "a"
            name = path.rsplit("/", 1)[-1]
            expected = oracle(path, name, exclude)
            assert is_excluded(path, name, exclude) == expected, (path, exclude)
            assert is_excluded(path, name, tuple(exclude)) == expected
            checked += 1
            matched += expected
    assert checked == 10_000 and 500 < matched < 9_500  # both answers are well represented
