"""``link-health.html``: the link-health report as one self-contained page a person can work with.

No network: the CSS, the script and the chart (an SVG drawn here) are inline. Rows are rendered here, so the
page reads without JavaScript; the script adds sorting (click a column heading), filtering (the box above each
table) and the "shown N of M" counts. Each target expands to its locations; each location opens the note in
Obsidian (``obsidian://open?vault=...&file=...``) or the concept doc (a path relative to the bundle root).

A test hook, for a browser driven from the command line (``chromium --headless --dump-dom``): the page reads
``#filter=SECTION:TEXT`` and ``#sort=SECTION:COLUMN[:desc]`` from its URL on load, applies them, and then sets
``data-ready="1"`` on ``<body>``.
"""

from __future__ import annotations

import html
import posixpath
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any
from urllib.parse import quote

from vault2okf.bundle import CONCEPTS, obsidian_uri

COLOURS = {
    "resolved": "#3a7d44",
    "overridden": "#5b8c5a",
    "alias": "#9bb53b",
    "self": "#8aa",
    "attachment": "#6b8fb3",
    "ambiguous": "#d39b2a",
    "excluded": "#999",
    "missing_attachment": "#c46a2f",
    "broken": "#b3261e",
    "missing_block": "#c9a227",
}
STATUS_NAMES = {
    "resolved": "resolved",
    "ambiguous": "ambiguous",
    "alias": "alias only",
    "overridden": "overridden",
    "broken": "broken",
    "self": "same note",
    "attachment": "attachment",
    "missing_attachment": "missing attachment",
    "excluded": "excluded",
    "missing_block": "missing block",
}


def link_health_html(
    data: Mapping[str, Any], renamed: Mapping[str, str] | None = None, memo: dict[str, tuple[Any, ...]] | None = None
) -> str:
    """The page for ``LinkReport.to_json()`` data; ``renamed`` maps the vault paths whose doc is not
    ``concepts/<vault path>`` (a collision or a reserved name moved it) to their doc path in the bundle. ``memo``
    (``report.ReportMemo.html``): each section as last made, with what it was made from; a section made from the
    same rows, vault and renamed docs is taken again (a watcher's next page)."""
    page = _Page(str(data["vault"]), dict(renamed or {}))
    t = data["totals"]
    parts = [
        f"<h1>Link health: {_e(data['vault'])}</h1>",
        f'<p class="totals" id="totals">{_n(t["notes"], "note")}, {_n(t["links"], "link")} and '
        f"{_n(t['embeds'], 'embed')} ({t['in_frontmatter']:,} in frontmatter); "
        f"<b>{t['resolved_share']:.1%}</b> of note links resolve.</p>",
        status_chart(t["by_status"], t["unique_targets"]),
        _nav(data),
    ]
    parts += [_section(page, spec, section_rows(data, spec.key), memo) for spec in SECTIONS]
    return _document(f"Link health: {data['vault']}", "\n".join(parts))


def _section(page: _Page, spec: _Spec, rows: list[dict[str, Any]], memo: dict[str, tuple[Any, ...]] | None) -> str:
    was = memo.get(spec.key) if memo is not None else None
    if was is not None and was[0] == page.vault and was[1] == page.renamed and was[2] == rows:
        return str(was[3])
    made = page.section(spec, rows)
    if memo is not None:
        memo[spec.key] = (page.vault, page.renamed, rows, made)
    return made


def status_chart(by_status: Mapping[str, int], unique: Mapping[str, int]) -> str:
    """Horizontal bars, one per status with links, as inline SVG (log-free: widths are shares of the biggest)."""
    rows = [(s, n) for s, n in by_status.items() if n]
    if not rows:
        return '<p id="chart">No links.</p>'
    top = max(n for _, n in rows)
    bar_h, gap, label_w, bar_w = 22, 6, 170, 420
    height = len(rows) * (bar_h + gap) + gap
    out = [
        f'<svg id="chart" role="img" aria-label="links by status" width="{label_w + bar_w + 160}" '
        f'height="{height}" xmlns="http://www.w3.org/2000/svg">'
    ]
    for i, (status, n) in enumerate(rows):
        y = gap + i * (bar_h + gap)
        w = max(2, round(bar_w * n / top))
        name = STATUS_NAMES.get(status, status)
        out.append(
            f'<g class="bar" data-status="{_e(status)}"><text x="{label_w - 8}" y="{y + 15}" text-anchor="end">'
            f'{_e(name)}</text><rect x="{label_w}" y="{y}" width="{w}" height="{bar_h}" '
            f'fill="{COLOURS.get(status, "#777")}"><title>{_e(name)}: {n:,} links</title></rect>'
            f'<text x="{label_w + w + 6}" y="{y + 15}">{n:,} ({_n(unique.get(status, 0), "target")})</text></g>'
        )
    out.append("</svg>")
    return "".join(out)


class _Spec:
    def __init__(
        self,
        key: str,
        title: str,
        advice: str,
        columns: Sequence[str],
        cells: Callable[[_Page, dict[str, Any]], list[str]],
    ) -> None:
        self.key, self.title, self.advice, self.columns, self.cells = key, title, advice, columns, cells


def _doc_href(path: str, renamed: str | None) -> str:
    return quote(renamed or posixpath.join(CONCEPTS, path), safe="/")


@lru_cache(maxsize=1 << 16)
def _hrefs(vault: str, path: str, renamed: str | None) -> tuple[str, str]:
    """A note's two links (``_Page.note``), remembered across pages (a bounded memo): a watcher's next page
    quotes only the paths it has not seen."""
    doc = f' <a class="loc-doc" href="{_e(_doc_href(path, renamed))}">doc</a>' if path.lower().endswith(".md") else ""
    return _e(obsidian_uri(vault, path)), doc


class _Page:
    def __init__(self, vault: str, renamed: dict[str, str]) -> None:
        self.vault = vault
        self.renamed = renamed
        self._made: dict[str, tuple[str, str]] = {}

    def doc_href(self, path: str) -> str:
        return _doc_href(path, self.renamed.get(path))

    def note(self, path: str | None, line: int | None = None) -> str:
        """A note with its two links: open in Obsidian, open the concept doc."""
        if not path:
            return ""
        shown = f"{path}:{line}" if line is not None else path
        obsidian, doc = self._hrefs(path)
        return f'<a class="loc-obsidian" href="{obsidian}">{_e(shown)}</a>{doc}'

    def _hrefs(self, path: str) -> tuple[str, str]:
        """Both links of a note, made once per note however many locations name it (quoting is slow)."""
        if path not in self._made:
            self._made[path] = _hrefs(self.vault, path, self.renamed.get(path))
        return self._made[path]

    def locations(self, at: Sequence[str]) -> str:
        items = []
        for where in at:
            path, _, line = where.rpartition(":")
            items.append(f"<li>{self.note(path, int(line)) if line.isdigit() else _e(where)}</li>")
        summary = f"<summary>{_n(len(at), 'location')}</summary>"
        return f'<details class="locations">{summary}<ul>{"".join(items)}</ul></details>'

    def target(self, e: dict[str, Any]) -> str:
        return f'<span class="target">{_e(e["target"])}</span>{self.locations(e.get("at") or [])}'

    def section(self, spec: _Spec, entries: Sequence[dict[str, Any]]) -> str:
        head = f'<h2 id="{spec.key}">{_e(spec.title)} <small>({_n(len(entries), "row")})</small></h2>'
        if not entries:
            return f'<section data-section="{spec.key}">{head}<p class="empty">None.</p></section>'
        ths = "".join(f'<th data-col="{i}" title="sort">{_e(c)}</th>' for i, c in enumerate(spec.columns))
        rows = "".join(
            '<tr class="row">' + "".join(f"<td>{c}</td>" for c in spec.cells(self, e)) + "</tr>" for e in entries
        )
        return (
            f'<section data-section="{spec.key}">{head}<p class="advice">{spec.advice}</p>'
            f'<p><input class="filter" type="search" placeholder="filter {_e(spec.title.lower())}" '
            f'data-for="{spec.key}"> <span class="shown" data-for="{spec.key}"></span></p>'
            f'<table data-section="{spec.key}"><thead><tr>{ths}</tr></thead><tbody>{rows}</tbody></table></section>'
        )


def _suggestions(found: Sequence[dict[str, Any]]) -> str:
    if not found:
        return '<span class="none">no close name</span>'
    items = []
    for s in found:
        mark = ' class="confident" title="confident: written to --overrides"' if s.get("confident") else ""
        items.append(f'<li{mark}><code>{_e(s["path"])}</code> <span class="why">{_e(s["why"])}</span></li>')
    return f'<ul class="suggestions">{"".join(items)}</ul>'


def _codes(paths: Iterable[str]) -> str:
    return ", ".join(f"<code>{_e(p)}</code>" for p in paths)


def _num(n: int | float) -> str:
    return f'<span data-sort="{n}">{n:,}</span>'


SECTIONS = (
    _Spec("broken", "Broken links", "Nothing resolves these names. <code>vault2okf links BUNDLE --overrides &gt; "
          "fixes.toml</code> writes the confident suggestions (marked ✓) as overrides; <code>vault2okf convert VAULT "
          "-o BUNDLE --config fixes.toml</code> applies them.", ["target", "links", "suggestions (why)"],
          lambda p, e: [p.target(e), _num(e["count"]), _suggestions(e.get("suggestions") or [])]),
    _Spec("ambiguous", "Ambiguous links", "Several notes share the name; the one chosen is in the same folder, "
          "else the shortest path, else the first alphabetically.", ["target", "links", "chosen", "candidates"],
          lambda p, e: [p.target(e), _num(e["count"]), _codes(e["chosen"]), _codes(e["candidates"])]),
    _Spec("alias_only", "Resolved only through an alias", "Obsidian leaves a bare <code>[[Alias]]</code> "
          "unresolved; write <code>[[Note|Alias]]</code>.", ["target", "links", "note"],
          lambda p, e: [p.target(e), _num(e["count"]), p.note(e["note"])]),
    _Spec("overridden", "Pinned by an override", "Resolved by <code>[links.overrides]</code>.",
          ["target", "links", "note"], lambda p, e: [p.target(e), _num(e["count"]), p.note(e["note"])]),
    _Spec("excluded", "Links into excluded folders", "The note exists but its folder is excluded "
          "(<code>[walk] exclude</code>, templates); the link stays text.", ["target", "links", "note"],
          lambda p, e: [p.target(e), _num(e["count"]), f"<code>{_e(e['note'])}</code> " * bool(e["note"])
                        + f'<span class="why">{_e(e.get("why", ""))}</span>']),
    _Spec("missing_attachments", "Missing attachments", "Embedded files that are not in the vault.",
          ["target", "links"], lambda p, e: [p.target(e), _num(e["count"])]),
    _Spec("missing_blocks", "Links to missing blocks", "The note exists but holds no block with this id, so the "
          "link goes to the top of the note: end the block's line with <code> ^id</code>, or correct the link.",
          ["target", "links", "note", "why"],
          lambda p, e: [p.target(e), _num(e["count"]), p.note(e["note"]), f'<span class="why">{_e(e["why"])}</span>']),
    _Spec("variants", "Spelling variants", "Words written close to a word of a note title; add the suggested "
          "aliases to the note's frontmatter, or fix the spelling.",
          ["word", "also written", "notes", "suggested aliases"],
          lambda p, e: [f"<b>{_e(e['word'])}</b>", ", ".join(f"{_e(w)} ×{n}" for w, n in e["variants"].items()),
                        "<br>".join(p.note(n) for n in e["notes"]),
                        "<br>".join(f"<code>{_e(a['alias'])}</code> → {_e(a['note'])}" for a in e["aliases"])]),
    _Spec("types", "Types", "Where each type came from; map a folder under <code>[types]</code> in "
          "<code>vault2okf.toml</code> to change it.", ["folder", "type", "from", "notes"],
          lambda p, e: [f"<code>{_e(e['folder'] or '(top)')}</code>", _e(e["type"]), _e(e["rule"]), _num(e["notes"])]),
    _Spec("orphans", "Orphans", "Notes with no links in either direction.", ["note"],
          lambda p, e: [p.note(e["note"])]),
    _Spec("hubs", "Hubs", "The notes linked with the most other notes.", ["note", "linked notes", "share of vault"],
          lambda p, e: [p.note(e["note"]), _num(e["degree"]),
                        f'<span data-sort="{e["share_of_vault"]}">{e["share_of_vault"]:.1%}</span>']),
    _Spec("mentions", "Could be linked", "Notes that name another note (its file name, title or an alias, as "
          "whole words) without linking it, the most often named first (at most five per note); "
          "<code>vault2okf links BUNDLE --mentions</code> prints them as a list to work through.",
          ["note", "text", "write", "times"],
          lambda p, e: [p.note(e["note"], e["line"]), _e(e["text"]), f"<code>{_e(e['link'])}</code>",
                        _num(e["count"])]),
    _Spec("problems", "Notes with problems", "Converted as well as they could be.", ["note", "kind", "message"],
          lambda p, e: [p.note(e["path"], e.get("line")), _e(e["kind"]), _e(e["message"])]),
)  # fmt: skip


def _nav(data: Mapping[str, Any]) -> str:
    links = [f'<a href="#{s.key}">{_e(s.title)} ({len(section_rows(data, s.key))})</a>' for s in SECTIONS]
    return f"<nav>{' · '.join(links)}</nav>"


def section_rows(data: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    """The rows a section shows (orphans are plain paths in the JSON)."""
    if key == "mentions":  # one row per mention shown, its note beside it
        by_note = (data.get("mentions") or {}).get("by_note") or []
        return [{"note": n["note"], **m} for n in by_note for m in n["mentions"]]
    rows = data.get(key) or []
    return [{"note": r} for r in rows] if key == "orphans" else list(rows)


def _document(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head>\n<body>\n{body}\n<script>{SCRIPT}</script>\n"
        "</body></html>\n"
    )


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _n(count: int, word: str) -> str:
    return f"{count:,} {word if count == 1 else word + 's'}"


CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5rem auto;max-width:1200px;padding:0 1rem;
color:#222}
h1{font-size:1.6rem}h2{margin-top:2rem;border-bottom:1px solid #ddd}h2 small{color:#777;font-weight:normal}
nav{margin:1rem 0;line-height:2}nav a{white-space:nowrap}
table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid #eee;padding:4px 8px;text-align:left;
vertical-align:top}th{cursor:pointer;background:#f6f6f6;user-select:none}th.asc:after{content:" ▲"}
th.desc:after{content:" ▼"}tr.row[hidden]{display:none}code{font-size:12px;background:#f3f3f3;padding:0 3px}
.target{font-weight:600}.why{color:#555;font-size:12px}.suggestions{margin:0;padding-left:1.1rem}
.confident:before{content:"✓ ";color:#3a7d44;font-weight:bold}.none,.empty{color:#888}
details.locations summary{cursor:pointer;color:#555;font-size:12px}details.locations ul{margin:2px 0;
padding-left:1.1rem;font-size:12px}input.filter{width:320px;padding:3px 6px}.shown{color:#777;font-size:12px}
svg text{font-size:12px;fill:#333}.advice{color:#444}
""".strip()

SCRIPT = r"""
(function(){
function key(td){var s=td.querySelector('[data-sort]');if(s)return parseFloat(s.dataset.sort);
return td.textContent.trim().toLowerCase();}
function sortBy(table,col,desc){var tb=table.tBodies[0];var rows=Array.prototype.slice.call(tb.rows);
rows.sort(function(a,b){var x=key(a.cells[col]),y=key(b.cells[col]);var r=(x<y)?-1:(x>y)?1:0;return desc?-r:r;});
rows.forEach(function(r){tb.appendChild(r);});
Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,i){th.classList.remove('asc','desc');
if(i===col)th.classList.add(desc?'desc':'asc');});}
function filter(section,text){var t=document.querySelector('table[data-section="'+section+'"]');if(!t)return;
var q=text.toLowerCase(),shown=0,rows=t.tBodies[0].rows;
for(var i=0;i<rows.length;i++){var hit=!q||rows[i].textContent.toLowerCase().indexOf(q)>=0;rows[i].hidden=!hit;
if(hit)shown++;}
var c=document.querySelector('.shown[data-for="'+section+'"]');if(c)c.textContent='shown '+shown+' of '+rows.length;
var box=document.querySelector('input.filter[data-for="'+section+'"]');if(box&&box.value!==text)box.value=text;}
document.querySelectorAll('table[data-section]').forEach(function(table){
Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,i){th.addEventListener('click',function(){
sortBy(table,i,th.classList.contains('asc'));});});filter(table.dataset.section,'');});
document.querySelectorAll('input.filter').forEach(function(box){box.addEventListener('input',function(){
filter(box.dataset.for,box.value);});});
var h=decodeURIComponent(location.hash.slice(1));h.split('&').forEach(function(part){var kv=part.split('=');
if(kv.length<2)return;var v=kv.slice(1).join('=').split(':');
if(kv[0]==='filter')filter(v[0],v.slice(1).join(':'));
if(kv[0]==='sort'){var t=document.querySelector('table[data-section="'+v[0]+'"]');
if(t)sortBy(t,parseInt(v[1],10),v[2]==='desc');}});
document.body.dataset.ready='1';
})();
""".strip()
