"""``eval-*.html``: the evaluation report as one self-contained page (inline CSS, script and SVG; no network).

Built from the report's JSON (``EvalReport.to_json()`` or a saved ``eval-*.json``): recall by tier per method
as an SVG chart, the method table (recall, all-gold, MRR, budget), and one row per question with what each
core method found, sortable (click a heading) and filterable (the box above each table). The page reads
``#filter=SECTION:TEXT`` from its URL on load and then sets ``data-ready="1"`` on ``<body>`` (a test hook).

    python -m eval.html reports/eval-thellade.json   # writes reports/eval-thellade.html
"""

from __future__ import annotations

import html
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

TIERS = ("lookup", "synthesis", "temporal")
COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759")


def write_eval_html(data: Mapping[str, Any], out_dir: Path, stem: str, title: str = "Retrieval evaluation") -> Path:
    path = Path(out_dir) / f"{stem}.html"
    path.write_text(eval_html(data, title), encoding="utf-8", newline="\n")
    return path


def eval_html(data: Mapping[str, Any], title: str = "Retrieval evaluation") -> str:
    methods = data["methods"]
    core = [m for m in methods if ":" not in m]
    golden = data.get("golden", {})
    tiers = ", ".join(f"{t} {n}" for t, n in (golden.get("tiers") or {}).items())
    parts = [
        f"<h1>{_e(title)}</h1>",
        f'<p id="golden">{golden.get("questions", 0)} questions from <code>{_e(golden.get("path", ""))}</code>'
        f" ({_e(tiers)}).</p>",
        recall_chart(methods, core),
        _methods_table(methods),
        _questions_table(data.get("questions") or [], core),
    ]
    return _document(title, "\n".join(parts))


def recall_chart(methods: Mapping[str, Any], names: Sequence[str]) -> str:
    """Grouped bars: recall per tier (and overall) for each method, as inline SVG."""
    groups = [*TIERS, "overall"]
    bar, gap, left, height = 9, 14, 190, 18
    rows = len(names)
    h = rows * (len(groups) * bar + gap) + 40
    w = left + 420
    out = [f'<svg id="chart" role="img" aria-label="recall by tier" width="{w + 40}" height="{h}" '
           'xmlns="http://www.w3.org/2000/svg">']  # fmt: skip
    for k, g in enumerate(groups):
        out.append(f'<rect x="{left + 90 * k}" y="4" width="10" height="10" fill="{_colour(k)}"/>'
                   f'<text x="{left + 90 * k + 14}" y="13">{g}</text>')  # fmt: skip
    y = height + 8
    for name in names:
        m = methods[name]
        out.append(f'<text x="{left - 8}" y="{y + 2 * bar}" text-anchor="end">{_e(name)}</text>')
        for k, g in enumerate(groups):
            r = (m.get("overall") if g == "overall" else (m.get("tiers") or {}).get(g)) or {}
            value = r.get("recall")
            width = round(400 * value) if isinstance(value, int | float) else 0
            label = f"{value:.2f}" if isinstance(value, int | float) else "n/a"
            out.append(f'<rect class="bar" x="{left}" y="{y}" width="{max(width, 1)}" height="{bar - 1}" '
                       f'fill="{_colour(k)}"><title>{_e(name)} {g}: {label}</title></rect>')  # fmt: skip
            y += bar
        y += gap
    out.append("</svg>")
    return "".join(out)


def _colour(k: int) -> str:
    return COLOURS[k % len(COLOURS)]


def _methods_table(methods: Mapping[str, Any]) -> str:
    head = ["method", *(f"recall {t}" for t in TIERS), "recall", "all-gold", "MRR", "notes", "tokens"]
    rows = []
    for name, m in methods.items():
        tiers = m.get("tiers") or {}
        o, b = m.get("overall") or {}, m.get("budget") or {}
        cells = [f"<code>{_e(name)}</code>", *(_num((tiers.get(t) or {}).get("recall")) for t in TIERS)]
        cells += [_num(o.get("recall")), _num(o.get("hit_all")), _num(o.get("mrr"))]
        cells += [_num(b.get("notes"), 1), _num(b.get("tokens"), 0)]
        rows.append(cells)
    return _table("methods", "Methods", head, rows)


def _questions_table(questions: Sequence[Mapping[str, Any]], core: Sequence[str]) -> str:
    head = ["id", "tier", "gold", *core]
    rows = []
    for q in questions:
        recall = q.get("recall") or {}
        gold = "<br>".join(f"<code>{_e(g)}</code>" for g in q.get("gold") or []) or '<span class="none">none</span>'
        rows.append([_e(q["id"]), _e(q.get("tier", "")), gold, *(_num(recall.get(m)) for m in core)])
    return _table("questions", "Questions (recall per method)", head, rows)


def _table(key: str, title: str, head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    ths = "".join(f'<th data-col="{i}">{_e(h)}</th>' for i, h in enumerate(head))
    body = "".join('<tr class="row">' + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return (
        f'<section data-section="{key}"><h2 id="{key}">{_e(title)} <small>({len(rows)})</small></h2>'
        f'<p><input class="filter" type="search" placeholder="filter" data-for="{key}"> '
        f'<span class="shown" data-for="{key}"></span></p><table data-section="{key}"><thead><tr>{ths}</tr></thead>'
        f"<tbody>{body}</tbody></table></section>"
    )


def _num(value: Any, digits: int = 3) -> str:
    if not isinstance(value, int | float):
        return '<span data-sort="-1" class="none">–</span>'
    return f'<span data-sort="{value}">{value:.{digits}f}</span>'


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _document(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head>\n<body>\n{body}\n<script>{SCRIPT}</script>\n"
        "</body></html>\n"
    )


CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5rem auto;max-width:1200px;padding:0 1rem;color:#222}
table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid #eee;padding:3px 7px;text-align:left;
vertical-align:top}th{cursor:pointer;background:#f6f6f6}th.asc:after{content:" ▲"}th.desc:after{content:" ▼"}
tr.row[hidden]{display:none}code{font-size:12px}.none{color:#999}svg text{font-size:11px;fill:#333}
input.filter{width:300px;padding:3px 6px}.shown{color:#777;font-size:12px}
""".strip()

SCRIPT = r"""
(function(){
function key(td){var s=td.querySelector('[data-sort]');if(s)return parseFloat(s.dataset.sort);
return td.textContent.trim().toLowerCase();}
function sortBy(t,col,desc){var tb=t.tBodies[0];var rows=Array.prototype.slice.call(tb.rows);
rows.sort(function(a,b){var x=key(a.cells[col]),y=key(b.cells[col]);var r=(x<y)?-1:(x>y)?1:0;return desc?-r:r;});
rows.forEach(function(r){tb.appendChild(r);});Array.prototype.forEach.call(t.tHead.rows[0].cells,function(th,i){
th.classList.remove('asc','desc');if(i===col)th.classList.add(desc?'desc':'asc');});}
function filter(section,text){var t=document.querySelector('table[data-section="'+section+'"]');if(!t)return;
var q=text.toLowerCase(),n=0,rows=t.tBodies[0].rows;for(var i=0;i<rows.length;i++){
var hit=!q||rows[i].textContent.toLowerCase().indexOf(q)>=0;rows[i].hidden=!hit;if(hit)n++;}
var c=document.querySelector('.shown[data-for="'+section+'"]');if(c)c.textContent='shown '+n+' of '+rows.length;}
document.querySelectorAll('table[data-section]').forEach(function(t){Array.prototype.forEach.call(
t.tHead.rows[0].cells,function(th,i){th.addEventListener('click',function(){sortBy(t,i,th.classList.contains('asc'));});});
filter(t.dataset.section,'');});
document.querySelectorAll('input.filter').forEach(function(b){b.addEventListener('input',function(){
filter(b.dataset.for,b.value);});});
decodeURIComponent(location.hash.slice(1)).split('&').forEach(function(p){var kv=p.split('=');
if(kv[0]==='filter'&&kv.length>1){var v=kv.slice(1).join('=').split(':');filter(v[0],v.slice(1).join(':'));}});
document.body.dataset.ready='1';
})();
""".strip()


def main(argv: Sequence[str]) -> int:
    """Write ``<stem>.html`` beside each saved ``<stem>.json`` given."""
    for name in argv:
        src = Path(name)
        data = json.loads(src.read_text("utf-8"))
        title = f"Retrieval evaluation: {Path(str(data.get('golden', {}).get('path', src.stem))).stem}"
        print(write_eval_html(data, src.parent, src.stem, title))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
