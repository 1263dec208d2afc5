"""link-health.html and eval-*.html: self-contained pages, checked as markup here and in a real headless
Chromium (Debian's ``chromium``, installed by ``scripts/install_chromium.sh``; skipped, saying why, without it).

The browser runs the page's own script (``--dump-dom`` prints the DOM after it ran): the page applies the
``#filter=SECTION:TEXT`` hook from its URL, hides rows, then marks ``<body data-ready="1">``. Screenshots of
both pages are saved under ``reports/`` as evidence.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from eval.html import write_eval_html
from vault2okf.bundle import obsidian_uri
from vault2okf.convert import convert

VAULTS = Path(__file__).resolve().parents[2] / "shared" / "vaults"
ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports"
SECTIONS = ("broken", "ambiguous", "alias_only", "overridden", "excluded", "missing_attachments", "variants",
            "types", "orphans", "hubs", "problems")  # fmt: skip


class Page(HTMLParser):
    """Rows per table section (and which are hidden), every href, and what would load from elsewhere."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.rows: dict[str, int] = {}
        self.hidden: dict[str, int] = {}
        self.hrefs: list[tuple[str, str]] = []  # (class, href)
        self.external: list[str] = []
        self.body: dict[str, str | None] = {}
        self._table: str | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "body":
            self.body = a
        if tag == "table":
            self._table = a.get("data-section")
        if tag == "tr" and a.get("class") == "row" and self._table:
            self.rows[self._table] = self.rows.get(self._table, 0) + 1
            self.hidden[self._table] = self.hidden.get(self._table, 0) + ("hidden" in a)
        if tag == "a":
            self.hrefs.append((a.get("class") or "", a.get("href") or ""))
        if tag in ("script", "img", "iframe", "link") and (a.get("src") or a.get("href")):
            self.external.append(f"{tag} {a.get('src') or a.get('href')}")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("no chromium on this machine: run scripts/install_chromium.sh (Debian's chromium package)")
    return exe


def browse(page: Path, fragment: str = "", screenshot: Path | None = None) -> str:
    """The DOM after the page's script ran, from headless Chromium (offline: the page needs no network)."""
    url = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    flags = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             "--disable-extensions", "--disable-background-networking",
             f"--user-data-dir={page.parent / '.chrome'}"]  # fmt: skip
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([*flags, f"--screenshot={screenshot}", "--window-size=1280,1600", url],
                       check=True, capture_output=True, timeout=120)  # fmt: skip
    done = subprocess.run([*flags, "--dump-dom", url], check=True, capture_output=True, timeout=120, text=True)
    return done.stdout


@pytest.fixture(scope="module")
def blades(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    vault = VAULTS / "blades-of-vengeance"
    if not vault.is_dir():
        pytest.skip(f"{vault} not present")
    out = tmp_path_factory.mktemp("html") / "blades"
    convert(vault, out)
    return out, json.loads((out / "link-health.json").read_text("utf-8"))


def _expected_rows(data: dict, section: str) -> int:
    return len(data[section])


def test_link_health_html_is_self_contained_and_has_a_row_per_entry(blades: tuple[Path, dict]) -> None:
    out, data = blades
    page = Page((out / "link-health.html").read_text("utf-8"))
    assert page.external == []  # nothing loads from elsewhere: CSS, script and chart are inline
    assert all(h.startswith(("obsidian://open?", "#", "concepts/")) for _, h in page.hrefs), page.hrefs
    for section in SECTIONS:
        assert page.rows.get(section, 0) == _expected_rows(data, section), section
    first = data["broken"][0]["at"][0]  # "Journal/Session 1.md:12"
    path = first.rpartition(":")[0]
    assert ("loc-obsidian", obsidian_uri("blades-of-vengeance", path)) in page.hrefs
    assert ("loc-doc", "concepts/" + path.replace(" ", "%20")) in page.hrefs
    assert (out / "concepts" / path).is_file()


def test_link_health_html_in_chromium_filters_rows_and_links_locations(blades: tuple[Path, dict]) -> None:
    out, data = blades
    html_path = out / "link-health.html"
    page = Page(browse(html_path, screenshot=REPORTS / "screenshot-link-health-blades-of-vengeance.png"))
    assert page.body.get("data-ready") == "1"  # the script ran to the end
    for section in SECTIONS:
        assert page.rows.get(section, 0) == _expected_rows(data, section), section
    assert sum(page.hidden.values()) == 0
    kabuki = [e for e in data["broken"] if "Kabuki" in e["target"]]
    assert kabuki and len(data["broken"]) > len(kabuki)
    filtered = Page(browse(html_path, "filter=broken:kabuki"))
    assert filtered.rows["broken"] - filtered.hidden["broken"] == len(kabuki)
    assert filtered.hidden["broken"] == len(data["broken"]) - len(kabuki)
    assert filtered.hidden.get("types", 0) == 0  # a filter acts on its own table only
    path = kabuki[0]["at"][0].rpartition(":")[0]
    assert ("loc-obsidian", obsidian_uri("blades-of-vengeance", path)) in filtered.hrefs
    assert (REPORTS / "screenshot-link-health-blades-of-vengeance.png").stat().st_size > 10_000


def test_eval_html_in_chromium(tmp_path: Path) -> None:
    source = REPORTS / "eval-children-of-ash.json"
    data = json.loads(source.read_text("utf-8"))
    page_path = write_eval_html(data, tmp_path, "eval-children-of-ash", "Retrieval evaluation: children-of-ash")
    static = Page(page_path.read_text("utf-8"))
    assert static.external == [] and static.rows["questions"] == len(data["questions"])
    assert static.rows["methods"] == len(data["methods"])
    page = Page(browse(page_path, screenshot=REPORTS / "screenshot-eval-children-of-ash.png"))
    assert page.body.get("data-ready") == "1" and page.rows["questions"] == len(data["questions"])
    temporal = sum(1 for q in data["questions"] if q["tier"] == "temporal")
    assert 0 < temporal < len(data["questions"])
    filtered = Page(browse(page_path, "filter=questions:temporal"))
    assert filtered.rows["questions"] - filtered.hidden["questions"] == temporal
    assert filtered.hidden["methods"] == 0
