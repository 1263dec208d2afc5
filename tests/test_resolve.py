"""Obsidian's link resolution, one case table (obsidian-export's lookup tests are the model)."""

from __future__ import annotations

import pytest

from vault2okf.errors import Vault2OkfError
from vault2okf.resolve import Resolver, Status

NOTES = [
    "Home.md",
    "People/Bob Smith.md",
    "People/Alice.md",
    "Villains/Alice.md",
    "Deep/Nested/Folder/Alice.md",
    "Places/Noteä.md",
    "Places/Town/Square.md",
    "Sessions/Session 1.md",
    "Sessions/Index.md",
]
ATTACHMENTS = ["assets/map.png", "docs/rules.pdf"]
ALIASES = {"People/Bob Smith.md": ["Bobby", "The Smith"]}
OVERRIDES = {"Alicia": "Villains/Alice.md"}
EXCLUDED = ["Templates/Template - NPC.md", "Templates/Home.md", "Templates/banner.png"]


@pytest.fixture(scope="module")
def resolver() -> Resolver:
    return Resolver(NOTES, ATTACHMENTS, ALIASES, OVERRIDES, excluded=EXCLUDED)


@pytest.mark.parametrize(
    ("target", "source", "status", "path", "rule"),
    [
        ("Home", "x.md", Status.RESOLVED, "Home.md", "exact"),
        ("Home.md", "x.md", Status.RESOLVED, "Home.md", "exact"),
        ("  Home  ", "x.md", Status.RESOLVED, "Home.md", "exact"),
        ("home", "x.md", Status.RESOLVED, "Home.md", "exact"),
        ("People/Bob Smith", "x.md", Status.RESOLVED, "People/Bob Smith.md", "exact"),
        ("/People/Bob Smith.md", "x.md", Status.RESOLVED, "People/Bob Smith.md", "exact"),
        ("bob smith", "x.md", Status.RESOLVED, "People/Bob Smith.md", "basename"),
        ("Town/Square", "x.md", Status.RESOLVED, "Places/Town/Square.md", "suffix"),
        ("./Session 1", "Sessions/Index.md", Status.RESOLVED, "Sessions/Session 1.md", "relative"),
        ("../Home", "Sessions/Index.md", Status.RESOLVED, "Home.md", "relative"),
        ("Session 1", "Sessions/Index.md", Status.RESOLVED, "Sessions/Session 1.md", "basename"),
        ("Town/Square", "Places/x.md", Status.RESOLVED, "Places/Town/Square.md", "relative"),
        ("Note\u0061\u0308", "x.md", Status.RESOLVED, "Places/Noteä.md", "basename"),  # NFD -> NFC
        ("Alice", "People/Bob Smith.md", Status.AMBIGUOUS, "People/Alice.md", "basename"),  # same folder
        ("Alice", "Villains/x.md", Status.AMBIGUOUS, "Villains/Alice.md", "basename"),
        ("Alice", "Home.md", Status.AMBIGUOUS, "People/Alice.md", "basename"),  # shortest, then alphabetical
        ("Alicia", "x.md", Status.OVERRIDDEN, "Villains/Alice.md", "override"),
        ("Bobby", "x.md", Status.ALIAS, "People/Bob Smith.md", "alias"),
        ("the smith", "x.md", Status.ALIAS, "People/Bob Smith.md", "alias"),
        ("", "People/Alice.md", Status.SELF, "People/Alice.md", "self"),
        ("map.png", "x.md", Status.ATTACHMENT, "assets/map.png", "basename"),
        ("assets/map.png", "x.md", Status.ATTACHMENT, "assets/map.png", "exact"),
        ("rules.pdf", "x.md", Status.ATTACHMENT, "docs/rules.pdf", "basename"),
        ("missing.png", "x.md", Status.MISSING_ATTACHMENT, None, ""),
        ("Nobody", "x.md", Status.BROKEN, None, ""),
        ("Nobody.md", "x.md", Status.BROKEN, None, ""),
        ("Version 1.2", "x.md", Status.MISSING_ATTACHMENT, None, ""),
        ("Template - NPC", "x.md", Status.EXCLUDED, "Templates/Template - NPC.md", "excluded"),
        ("Templates/Template - NPC", "x.md", Status.EXCLUDED, "Templates/Template - NPC.md", "excluded"),
        ("Home", "Templates/x.md", Status.RESOLVED, "Home.md", "exact"),  # a converted note wins
    ],
)
def test_resolve(resolver: Resolver, target: str, source: str, status: Status, path: str | None, rule: str) -> None:
    res = resolver.resolve(target, source)
    assert (res.status, res.path, res.rule) == (status, path, rule)


def test_ambiguous_lists_every_candidate_chosen_first(resolver: Resolver) -> None:
    res = resolver.resolve("Alice", "Home.md")
    assert res.candidates == ("People/Alice.md", "Villains/Alice.md", "Deep/Nested/Folder/Alice.md")


def test_unambiguous_has_no_candidates(resolver: Resolver) -> None:
    assert resolver.resolve("Home", "x.md").candidates == ()


def test_an_override_to_a_missing_file_is_a_clear_error() -> None:
    with pytest.raises(Vault2OkfError, match=r"\[links.overrides\]: 'Alicia' = 'Nowhere/Alice.md' names no file"):
        Resolver(NOTES, ATTACHMENTS, ALIASES, {"Alicia": "Nowhere/Alice.md"})


def test_an_override_may_omit_md_and_lead_with_a_slash() -> None:
    resolver = Resolver(NOTES, ATTACHMENTS, ALIASES, {"Alicia": "/Villains/Alice"})
    assert resolver.resolve("alicia", "x.md").path == "Villains/Alice.md"


def test_an_upper_case_extension_is_a_note_of_that_name() -> None:
    resolver = Resolver(["Lore/Dragons.MD", "Home.md"])
    assert (resolver.resolve("Dragons", "Home.md").path, resolver.resolve("Lore/Dragons", "Home.md").rule) == (
        "Lore/Dragons.MD",
        "exact",
    )


def test_twins_by_extension_case_are_ambiguous_and_both_listed() -> None:
    res = Resolver(["foo.md", "foo.MD"]).resolve("foo", "x.md")
    assert (res.status, set(res.candidates)) == (Status.AMBIGUOUS, {"foo.md", "foo.MD"})
    assert Resolver(["foo.md", "foo.MD"], overrides={"foo": "foo.MD"}).resolve("foo", "x.md").path == "foo.MD"


def test_an_override_to_an_attachment_is_an_attachment() -> None:
    res = Resolver(NOTES, ATTACHMENTS, overrides={"the map": "assets/map.png"}).resolve("The Map", "x.md")
    assert (res.status, res.path, res.rule) == (Status.ATTACHMENT, "assets/map.png", "override")


def test_an_embed_of_one_of_two_attachments_is_an_attachment_with_its_candidates() -> None:
    resolver = Resolver(["A/Notes/Note.md"], ["A/Assets/pic.png", "B/Assets/pic.png"], {}, {})
    res = resolver.resolve("Assets/pic.png", "A/Notes/Note.md")
    assert res.status is Status.ATTACHMENT and res.path == "A/Assets/pic.png"
    assert res.candidates == ("A/Assets/pic.png", "B/Assets/pic.png")


def test_a_vault_with_two_attachments_of_one_name_converts_and_reports_them(tmp_path) -> None:  # noqa: ANN001
    """A copy of a vault folder beside the original: embeds match two files (a crash before this fix)."""
    from vault2okf.convert import convert

    for side in ("one", "two"):
        (tmp_path / "v" / side / "Assets").mkdir(parents=True)
        (tmp_path / "v" / side / "Assets" / "pic.png").write_bytes(b"png " + side.encode())
        (tmp_path / "v" / side / "Notes").mkdir()
        (tmp_path / "v" / side / "Notes" / "Note.md").write_text("![[Assets/pic.png]]\n", "utf-8")
    result = convert(tmp_path / "v", tmp_path / "out")
    data = result.report.to_json()
    assert data["totals"]["by_status"]["attachment"] == 2
    assert [e["candidates"] for e in data["ambiguous"]] == [["one/Assets/pic.png", "two/Assets/pic.png"]]
    doc = (tmp_path / "out" / "concepts" / "two" / "Notes" / "Note.md").read_text("utf-8")
    assert "](../../one/Assets/pic.png)" in doc
    assert (tmp_path / "out" / "concepts" / "one" / "Assets" / "pic.png").is_file()
