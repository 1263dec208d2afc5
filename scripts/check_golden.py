#!/usr/bin/env python3
"""Check a golden question set (JSON Lines) against the vault it was written for.

Usage:
    python scripts/check_golden.py golden/thellade.jsonl ../shared/vaults/thellade
    python scripts/check_golden.py --all [--vaults ../shared/vaults]
    (add --no-minimums to check a draft set without the set-size rules)

--all checks every golden/<vault>.jsonl against <vaults>/<vault> (default: ../shared/vaults next to the
repository) and exits 1 if any set fails or its vault folder is missing.

Standard library only. Checks, per line:
  * valid JSON object, keys exactly id, tier, question, gold, answer, answer_entities (in that order)
  * known tier (lookup, synthesis, temporal, unanswerable), unique id, non-empty question
  * every gold path is vault-relative, "/"-separated, NFC, ends in ".md" and exists as a file
  * unanswerable: gold [] and answer_entities [] and answer "not found in the vault"
  * answerable: at least one gold note, 1-4 answer_entities; synthesis needs 2+ distinct gold notes
  * each answer_entity occurs (case-insensitive, NFC) in the text of at least one gold note
  * temporal: at least two of its gold notes are session notes (file name "Session 6", "session-2-...")
and over the whole set: at most half of the questions name one of their gold notes' titles (file stem), and the
set-size rules (unless --no-minimums):
  * at least 30 questions and at least 2 unanswerable;
  * a vault with session notes: at least 9 lookup, 9 synthesis and 9 temporal (12 each for the two
    original sets, thellade and children-of-ash, which were grown to that);
  * a vault without session notes: no temporal questions, and at least 12 lookup and 12 synthesis;
  * synthesis has both a linked and an unlinked gold pair.

Prints a summary per tier, the link relation of every synthesis question (whether any two of its gold
notes link each other: wikilink or markdown link, either direction) and exits 1 on any error.
"""

from __future__ import annotations

import json
import os
import re
import sys
import unicodedata
import urllib.parse
from collections import Counter, defaultdict

KEYS = ["id", "tier", "question", "gold", "answer", "answer_entities"]
TIERS = ["lookup", "synthesis", "temporal", "unanswerable"]
NOT_FOUND = "not found in the vault"

MIN_TOTAL = 30
MIN_UNANSWERABLE = 2
MIN_PER_TIER = 9
MIN_PER_TIER_NO_SESSIONS = 12
MIN_PER_TIER_BY_VAULT = {"thellade": 12, "children-of-ash": 12}
# A session note's file name says so: "Session 6", "Campaign 1 - Session 06 - ...", "session-2-mires-end".
SESSION_NAME = re.compile(r"(?<![a-z])session[\s_-]*\d+", re.IGNORECASE)

WIKILINK = re.compile(r"!?\[\[([^\]|#^]+)")
MDLINK = re.compile(r"\]\(<?([^)<>]+?\.md)>?(?:#[^)]*)?\)")


def nfc(s: str) -> str:
    return unicodedata.normalize("NFC", s)


def fold(s: str) -> str:
    return nfc(s).casefold()


def read_note(vault: str, rel: str) -> str:
    with open(os.path.join(vault, *rel.split("/")), encoding="utf-8", errors="replace") as fh:
        return nfc(fh.read())


def link_targets(text: str, src: str) -> set[str]:
    """Link targets of a note as vault-relative strings without '.md' (wikilinks may be bare names)."""
    out = set()
    for m in WIKILINK.finditer(text):
        t = m.group(1).strip()
        out.add(t[:-3] if t.endswith(".md") else t)
    for m in MDLINK.finditer(text):
        t = urllib.parse.unquote(m.group(1)).strip()
        if re.match(r"^[a-z]+://", t):
            continue
        if t.startswith("/"):
            t = t.lstrip("/")
        else:
            t = os.path.normpath(os.path.join(os.path.dirname(src), t)).replace(os.sep, "/")
        out.add(t[:-3])
    return {nfc(t) for t in out}


def resolves_to(target: str, rel: str) -> bool:
    stem_path = rel[:-3]
    if "/" in target:
        return stem_path == target or stem_path.endswith("/" + target)
    return os.path.basename(stem_path) == target


def notes_linked(vault: str, a: str, b: str, cache: dict) -> bool:
    for src, dst in ((a, b), (b, a)):
        if src not in cache:
            cache[src] = link_targets(read_note(vault, src), src)
        if any(resolves_to(t, dst) for t in cache[src]):
            return True
    return False


def names_title(question: str, rel: str) -> bool:
    stem = os.path.basename(rel)[:-3]
    cands = {stem}
    if stem.lower().startswith("the "):
        cands.add(stem[4:])
    q = fold(question)
    return any(re.search(r"(?<!\w)" + re.escape(fold(c)) + r"(?!\w)", q) for c in cands if c.strip())


def is_session_note(rel: str) -> bool:
    return bool(SESSION_NAME.search(os.path.basename(rel)[:-3]))


def session_notes(vault: str) -> list[str]:
    out = []
    for root, dirs, files in os.walk(vault):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for f in files:
            if f.endswith(".md") and is_session_note(f):
                out.append(nfc(os.path.relpath(os.path.join(root, f), vault).replace(os.sep, "/")))
    return sorted(out)


def minimum_errors(counts: Counter, has_sessions: bool, vault_name: str, relations: Counter) -> list[str]:
    """The set-size rules (see the module docstring); one message per broken rule."""
    errs = []
    total = sum(counts.values())
    if total < MIN_TOTAL:
        errs.append(f"set has {total} questions, needs at least {MIN_TOTAL}")
    if counts["unanswerable"] < MIN_UNANSWERABLE:
        errs.append(f"set has {counts['unanswerable']} unanswerable questions, needs at least {MIN_UNANSWERABLE}")
    if has_sessions:
        need = MIN_PER_TIER_BY_VAULT.get(vault_name, MIN_PER_TIER)
        tiers = ["lookup", "synthesis", "temporal"]
    else:
        need = MIN_PER_TIER_NO_SESSIONS
        tiers = ["lookup", "synthesis"]
        if counts["temporal"]:
            errs.append(f"vault has no session notes, so the set must have no temporal tier (has {counts['temporal']})")
    for t in tiers:
        if counts[t] < need:
            errs.append(f"set has {counts[t]} {t} questions, needs at least {need}")
    if counts["synthesis"] and not (relations["linked"] and relations["unlinked"]):
        errs.append(f"synthesis needs both linked and unlinked gold pairs (has {dict(relations)})")
    return errs


def check(jsonl: str, vault: str, *, minimums: bool = True) -> int:
    errors: list[str] = []
    rows: list[dict] = []
    seen: set[str] = set()

    def err(where: str, msg: str) -> None:
        errors.append(f"{where}: {msg}")

    if not os.path.isdir(vault):
        print(f"error: vault folder not found: {vault}", file=sys.stderr)
        return 2
    with open(jsonl, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()

    note_cache: dict[str, str] = {}
    for n, line in enumerate(lines, 1):
        where = f"line {n}"
        if not line.strip():
            err(where, "blank line")
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            err(where, f"invalid JSON ({e})")
            continue
        if not isinstance(obj, dict):
            err(where, "not a JSON object")
            continue
        qid = obj.get("id")
        if isinstance(qid, str) and qid:
            where = f"line {n} ({qid})"
        missing = [k for k in KEYS if k not in obj]
        extra = [k for k in obj if k not in KEYS]
        if missing:
            err(where, f"missing keys {missing}")
            continue
        if extra:
            err(where, f"unknown keys {extra}")
        if list(obj)[: len(KEYS)] != KEYS:
            err(where, f"keys out of order: {list(obj)}")
        if not isinstance(qid, str) or not qid:
            err(where, "id must be a non-empty string")
        elif qid in seen:
            err(where, "duplicate id")
        else:
            seen.add(qid)
        tier = obj["tier"]
        if tier not in TIERS:
            err(where, f"unknown tier {tier!r}")
        if not isinstance(obj["question"], str) or not obj["question"].strip():
            err(where, "question must be a non-empty string")
        if not isinstance(obj["answer"], str) or not obj["answer"].strip():
            err(where, "answer must be a non-empty string")
        gold, ents = obj["gold"], obj["answer_entities"]
        if not isinstance(gold, list) or not all(isinstance(g, str) for g in gold):
            err(where, "gold must be a list of strings")
            continue
        if not isinstance(ents, list) or not all(isinstance(e, str) and e.strip() for e in ents):
            err(where, "answer_entities must be a list of non-empty strings")
            continue
        if len(set(gold)) != len(gold):
            err(where, "duplicate gold paths")

        good_gold = []
        for g in gold:
            if g != nfc(g):
                err(where, f"gold path not NFC: {g!r}")
            if "\\" in g or g.startswith("/") or g.startswith("./") or "/../" in f"/{g}":
                err(where, f"gold path must be vault-relative with '/' separators: {g!r}")
                continue
            if not g.endswith(".md"):
                err(where, f"gold path must end in .md: {g!r}")
            if os.path.basename(g) == ".md":
                err(where, f"gold note has no name: {g!r}")
            if not os.path.isfile(os.path.join(vault, *g.split("/"))):
                err(where, f"gold file not in vault: {g!r}")
                continue
            good_gold.append(g)

        if tier == "unanswerable":
            if gold:
                err(where, "unanswerable must have empty gold")
            if ents:
                err(where, "unanswerable must have empty answer_entities")
            if obj["answer"] != NOT_FOUND:
                err(where, f"unanswerable answer must be {NOT_FOUND!r}")
        elif tier in TIERS:
            if not gold:
                err(where, f"{tier} needs at least one gold note")
            if not 1 <= len(ents) <= 4:
                err(where, f"expected 1-4 answer_entities, got {len(ents)}")
            if tier == "synthesis" and len(set(gold)) < 2:
                err(where, "synthesis needs 2+ gold notes")
            for g in good_gold:
                if g not in note_cache:
                    note_cache[g] = fold(read_note(vault, g))
            for e in ents:
                if not any(fold(e) in note_cache[g] for g in good_gold):
                    err(where, f"answer_entity {e!r} not found in any gold note")
            if tier == "temporal" and sum(is_session_note(g) for g in set(gold)) < 2:
                err(where, "temporal needs at least two session notes in gold (it must span sessions)")
        rows.append(obj)

    # Titles: at most half of the questions may name one of their own gold notes' titles.
    titled = [r["id"] for r in rows if any(names_title(r["question"], g) for g in r["gold"])]
    if rows and len(titled) * 2 > len(rows):
        errors.append(f"{len(titled)}/{len(rows)} questions name a gold note's title (max half): {titled}")

    # Summary.
    by_tier: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_tier[r["tier"]].append(r)
    print(f"{jsonl}: {len(rows)} questions against {vault}")
    for t in TIERS + sorted(set(by_tier) - set(TIERS)):
        rs = by_tier.get(t, [])
        if not rs:
            print(f"  {t:<13} 0")
            continue
        mean_gold = sum(len(r["gold"]) for r in rs) / len(rs)
        print(f"  {t:<13} {len(rs):>3}  (mean gold notes {mean_gold:.1f})")
    print(f"  questions naming a gold note's title: {len(titled)}/{len(rows)}")

    sessions = session_notes(vault)
    print(f"  session notes in the vault: {len(sessions)}")

    link_cache: dict = {}
    syn = [r for r in rows if r["tier"] == "synthesis"]
    rel: Counter = Counter()
    if syn:
        print("  synthesis link relation:")
        for r in syn:
            gold = [g for g in r["gold"] if os.path.isfile(os.path.join(vault, *g.split("/")))]
            pairs = [(a, b) for i, a in enumerate(gold) for b in gold[i + 1 :]]
            linked = any(notes_linked(vault, a, b, link_cache) for a, b in pairs)
            rel["linked" if linked else "unlinked"] += 1
            print(f"    {r['id']:<10} {'linked' if linked else 'unlinked'}")
        print(f"    total: {rel['linked']} linked, {rel['unlinked']} unlinked")

    if minimums:
        counts = Counter(r["tier"] for r in rows)
        name = os.path.basename(os.path.normpath(vault))
        errors.extend(minimum_errors(counts, bool(sessions), name, rel))

    if errors:
        print(f"{len(errors)} error(s):", file=sys.stderr)
        for e in errors:
            print(f"  {e}", file=sys.stderr)
        return 1
    print("OK")
    return 0


def check_all(vaults: str, *, minimums: bool = True) -> int:
    golden = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "golden")
    sets = sorted(f for f in os.listdir(golden) if f.endswith(".jsonl"))
    if not sets:
        print(f"error: no golden sets in {golden}", file=sys.stderr)
        return 2
    failed = []
    for f in sets:
        vault = os.path.join(vaults, f[: -len(".jsonl")])
        rc = check(os.path.join(golden, f), vault, minimums=minimums)
        if rc:
            failed.append(f)
        print()
    tail = f"; failed: {', '.join(failed)}" if failed else ""
    print(f"{len(sets) - len(failed)}/{len(sets)} golden sets OK{tail}")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    args = argv[1:]
    minimums = "--no-minimums" not in args
    args = [a for a in args if a != "--no-minimums"]
    if args and args[0] == "--all":
        vaults = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "vaults")
        if len(args) == 3 and args[1] == "--vaults":
            vaults = args[2]
        elif len(args) != 1:
            print(__doc__, file=sys.stderr)
            return 2
        return check_all(os.path.normpath(vaults), minimums=minimums)
    if len(args) != 2 or args[0] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 2
    return check(args[0], args[1], minimums=minimums)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
