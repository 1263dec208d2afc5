"""Read a bundle's link-health report back (the ``links`` command)."""

from __future__ import annotations

import json
import unicodedata
import webbrowser
from pathlib import Path
from typing import Any

from vault2okf.errors import Vault2OkfError
from vault2okf.protocol import not_a_folder

REPORT = "link-health"


def read_link_health(bundle: Path, *, as_json: bool = False) -> str:
    """The report's Markdown (without its frontmatter, which is for OKF readers), or its JSON re-indented; an
    error that says what to run when it is missing or bad."""
    path = bundle / f"{REPORT}.{'json' if as_json else 'md'}"
    if not path.is_file():
        raise Vault2OkfError(_missing(bundle))
    try:
        text = path.read_text("utf-8")
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n" if as_json else _body(text)
    except (UnicodeDecodeError, ValueError) as e:
        raise Vault2OkfError(f"{path} is damaged ({e}): convert the vault again to rewrite it") from e


def _body(markdown: str) -> str:
    """``markdown`` without a leading ``---`` frontmatter block (an older report has none)."""
    if markdown.startswith("---\n"):
        end = markdown.find("\n---\n", 3)
        if end != -1:
            return markdown[end + 5 :]
    return markdown


def _missing(bundle: Path) -> str:
    if not_a_folder(bundle):
        return str(not_a_folder(bundle))
    if not bundle.is_dir():
        return f"{bundle} does not exist: give a bundle written by `vault2okf convert VAULT -o BUNDLE`"
    if any(bundle.glob("*.md")) or (bundle / ".obsidian").is_dir():
        return (
            f"{bundle} looks like a vault, not a bundle: convert it with `vault2okf convert {bundle} -o BUNDLE`, "
            "then run `vault2okf links BUNDLE`"
        )
    return f"no link-health report in {bundle}: run `vault2okf convert VAULT -o {bundle}` first"


def load_report(path: Path) -> dict[str, Any]:
    """A link-health.json (a bundle's, or a saved copy), checked enough to compare and to write fixes from."""
    if path.is_dir():
        path = path / f"{REPORT}.json"
    if not path.is_file():
        raise Vault2OkfError(f"no link-health report at {path}: give a bundle or a saved link-health.json")
    try:
        data = json.loads(path.read_text("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise Vault2OkfError(f"{path} is not a link-health.json ({e})") from e
    if not isinstance(data, dict) or not isinstance(data.get("totals"), dict) or "broken" not in data:
        raise Vault2OkfError(f"{path} is not a link-health.json (no totals and broken sections)")
    return data


def overrides_toml(data: dict[str, Any]) -> str:
    """A ``[links.overrides]`` table for the report's broken and ambiguous targets: the confident fixes (and
    the overrides already applied) live, the unsure suggestions commented out, each with its evidence; the
    spelling variants as suggested aliases (comments: only the user edits the vault)."""
    out = [
        f"# Link fixes for the vault {data['vault']!r}, written by `vault2okf links BUNDLE --overrides`.",
        "# Apply them with: vault2okf convert VAULT -o BUNDLE --config fixes.toml (the vault is never written).",
        "# --config replaces the vault's own vault2okf.toml: if it has one, copy this table into it instead.",
        "# Live lines are confident suggestions; uncomment an unsure one (one per name) to use it.",
        "",
        "[links.overrides]",
    ]
    live, unsure = [], []
    for e in data.get("overridden") or []:
        live += [f"# already pinned: {_evidence(e)}", f"{_key(e['target'])} = {_key(e['note'])}", ""]
    for e in data.get("broken") or []:
        fix = e.get("fix")
        if fix:
            live += [f"# broken: {_evidence(e)}; {fix['why']}", f"{_key(e['target'])} = {_key(fix['path'])}", ""]
        elif e.get("suggestions"):
            unsure.append(f"# broken, unsure: {_evidence(e)}")
            unsure += [
                f"# {_key(e['target'])} = {_key(s['path'])}  # {s['why']} ({s['score']})" for s in e["suggestions"]
            ]
            unsure.append("")
    for e in data.get("ambiguous") or []:
        fix = e.get("fix")
        if fix:
            live += [f"# ambiguous: {_evidence(e)}; {fix['why']}", f"{_key(e['target'])} = {_key(fix['path'])}", ""]
        else:
            unsure.append(f"# ambiguous: {_evidence(e)}; chosen now: {', '.join(e['chosen'])}")
            unsure += [f"# {_key(e['target'])} = {_key(c)}" for c in e["candidates"]]
            unsure.append("")
    out += live or ["# (no confident fix)", ""]
    out += unsure
    variants = [(c, a) for c in data.get("variants") or [] for a in c.get("aliases") or []]
    if variants:
        out.append("# Spelling variants: add these aliases to the notes' frontmatter (aliases:), then convert again.")
        for c, a in variants:
            spellings = ", ".join(f"{w} x{n}" for w, n in c["variants"].items())
            out.append(
                f"# {a['note']}: aliases: [{json.dumps(a['alias'], ensure_ascii=False)}]  ({c['word']}: {spellings})"
            )
    return "\n".join(out).rstrip("\n") + "\n"


def _key(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text, ensure_ascii=False)


def _evidence(e: dict[str, Any]) -> str:
    at = e.get("at") or []
    more = f" (+{len(at) - 1} more)" if len(at) > 1 else ""
    return f"x{e['count']} at {at[0] if at else '?'}{more}"


SECTIONS = ("broken", "ambiguous", "alias_only", "overridden", "excluded", "missing_attachments", "missing_blocks")


def diff_reports(old: dict[str, Any], new: dict[str, Any]) -> str:
    """What changed between two link-health reports: totals by status, then targets that left or joined each
    section (a broken target that is now overridden, alias-only, ... says so)."""
    lines = [f"Link health: {old.get('vault')} -> {new.get('vault')}", ""]
    before, after = old["totals"].get("by_status", {}), new["totals"].get("by_status", {})
    lines.append(f"{'status':<20} {'before':>8} {'after':>8} {'change':>8}")
    for status in dict.fromkeys([*before, *after]):
        a, b = before.get(status, 0), after.get(status, 0)
        if a or b:
            lines.append(f"{status:<20} {a:>8} {b:>8} {b - a:>+8}")
    where_now = {_fold(e["target"]): s for s in SECTIONS for e in new.get(s) or []}
    changed = False
    for section in SECTIONS:
        was = {_fold(e["target"]): e for e in old.get(section) or []}
        now = {_fold(e["target"]): e for e in new.get(section) or []}
        gone = [was[k] for k in was if k not in now]
        came = [now[k] for k in now if k not in was]
        changed = changed or bool(gone or came)
        if gone:
            lines += ["", f"No longer {section.replace('_', ' ')} ({len(gone)}):"]
            lines += [
                f"  - {e['target']} x{e['count']}: now {where_now.get(_fold(e['target']), 'resolved')}" for e in gone
            ]
        if came:
            lines += ["", f"Newly {section.replace('_', ' ')} ({len(came)}):"]
            lines += [f"  - {e['target']} x{e['count']}" for e in came]
    if not changed:
        lines += ["", "No target changed section."]
    return "\n".join(lines) + "\n"


def _fold(target: str) -> str:
    return unicodedata.normalize("NFC", target.strip()).casefold()


def open_html(bundle: Path) -> Path:
    """The bundle's link-health.html, opened in the default browser (``webbrowser``; ``$BROWSER`` picks one)."""
    path = (bundle / f"{REPORT}.html").resolve()
    if not path.is_file():
        raise Vault2OkfError(_missing(bundle) if not (bundle / f"{REPORT}.json").is_file() else (
            f"{bundle} has no {REPORT}.html (written by an older vault2okf): convert the vault again"))  # fmt: skip
    webbrowser.open(path.as_uri())
    return path


def mentions_list(data: dict[str, Any]) -> str:
    """The report's unlinked mentions as a list to work through: ``note:line``, the words as written, the
    wikilink that would link them (the report keeps the top few per note; ``okf.duckdb`` has them all)."""
    section = data.get("mentions")
    if not isinstance(section, dict):
        raise Vault2OkfError("this link-health.json has no mentions: convert the vault again with this vault2okf")
    shown = sum(len(n["mentions"]) for n in section["by_note"])
    out = [
        f"# Unlinked mentions in {data['vault']!r}: {section['total']} in {section['notes']} notes "
        f"({shown} shown, the top {section['rule']['top_per_note']} per note; all in okf.duckdb's mentions table).",
        "# Each line: NOTE:LINE  the words as written  ->  the wikilink to write there (times named in the note).",
    ]
    for entry in section["by_note"]:
        for m in entry["mentions"]:
            times = f"  (x{m['count']})" if m["count"] > 1 else ""
            out.append(f"{entry['note']}:{m['line']}  {m['text']}  ->  {m['link']}{times}")
    return "\n".join(out) + "\n"
