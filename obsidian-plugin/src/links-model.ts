/**
 * The Link health view's model: the report's entries for one note (or the vault) as items with their line, and
 * the edit that fixes one link, computed as a range of one line and its replacement (shown, then applied by the
 * editor). Pure.
 */
import type { LinkReport } from "./api";
import { parseAt, stripMd } from "./paths";

export type LinkKind = "broken" | "ambiguous" | "alias" | "missing-block" | "mention";

export interface Choice {
  path: string; // a vault path the link can point at
  why: string;
  confident: boolean;
}

export interface LinkItem {
  id: string;
  kind: LinkKind;
  source: string; // vault path of the note holding the link
  line: number; // 1-based, in the vault file
  target: string; // the link's target as the report spells it (a mention: the note it names)
  headline: string;
  why: string;
  choices: Choice[]; // best first; none: nothing to apply
  mention?: { text: string; link: string }; // the words as written, the wikilink the report suggests
}

export const KIND_NAMES: Record<LinkKind, string> = {
  broken: "broken link",
  ambiguous: "ambiguous link",
  alias: "link through an alias",
  "missing-block": "link to a missing block",
  mention: "unlinked mention",
};

/** Every item of the report, in `notePath` only when it is given, by note and line. */
export function linkItems(report: LinkReport, notePath?: string): LinkItem[] {
  const items: LinkItem[] = [];
  const add = (kind: LinkKind, target: string, at: string[], make: () => Omit<LinkItem, "id" | "kind" | "source" | "line" | "target">) => {
    for (const where of at) {
      const place = parseAt(where);
      if (!place || (notePath !== undefined && place.path !== notePath)) continue;
      const id = `${kind}|${place.path}|${place.line}|${target}`;
      items.push({ id, kind, source: place.path, line: place.line, target, ...make() });
    }
  };
  for (const e of report.broken ?? []) {
    const choices = (e.suggestions ?? []).map((s) => ({ path: s.path, why: s.why, confident: s.confident }));
    add("broken", e.target, e.at, () => ({
      headline: `“${e.target}” goes nowhere`,
      why: e.fix
        ? `did you mean ${stripMd(e.fix.path)}? ${e.fix.why}`
        : choices.length
          ? `no note has this name; maybe ${choices.slice(0, 3).map((c) => stripMd(c.path)).join(", ")}`
          : "no note has this name: create it or correct the spelling",
      choices,
    }));
  }
  for (const e of report.ambiguous ?? []) {
    const first = e.fix ? [{ path: e.fix.path, why: e.fix.why, confident: true }] : [];
    const rest = e.candidates.filter((c) => c !== e.fix?.path).map((c) => ({ path: c, why: "has this name too", confident: false }));
    add("ambiguous", e.target, e.at, () => ({
      headline: `“${e.target}” could be ${e.candidates.length} notes`,
      why: `${e.candidates.map(stripMd).join(", ")} share the name; the bundle took ${e.chosen.map(stripMd).join(", ")}` +
        (e.fix ? `. Best: ${stripMd(e.fix.path)}, ${e.fix.why}` : ""),
      choices: [...first, ...rest],
    }));
  }
  for (const e of report.alias_only ?? []) {
    const note = e.note ?? "";
    add("alias", e.target, e.at, () => ({
      headline: `“${e.target}” is an alias of ${stripMd(note)}`,
      why: "Obsidian leaves a bare [[Alias]] unresolved: write [[Note|Alias]]",
      choices: note ? [{ path: note, why: "the note with this alias", confident: true }] : [],
    }));
  }
  for (const e of report.missing_blocks ?? []) {
    add("missing-block", e.target, e.at, () => ({
      headline: `“${e.target}”: no such block`,
      why: e.why ?? "the note holds no block with this id",
      choices: [],
    }));
  }
  for (const n of report.mentions?.by_note ?? []) {
    for (const m of n.mentions) {
      add("mention", m.target, [`${n.note}:${m.line}`], () => ({
        headline: `“${m.text}” names ${stripMd(m.target)} without a link`,
        why: m.count > 1 ? `named ${m.count} times in this note; link the first` : "named here without a link",
        choices: [{ path: m.target, why: "the note it names", confident: true }],
        mention: { text: m.text, link: m.link },
      }));
    }
  }
  return items.sort((a, b) => a.source.localeCompare(b.source) || a.line - b.line || a.kind.localeCompare(b.kind));
}

/** A link written in a line: where it is, and its parts. */
export interface FoundLink {
  from: number; // offsets in the line, `!` of an embed included
  to: number;
  style: "wiki" | "markdown";
  embed: boolean;
  target: string; // as written (a markdown link's decoded)
  subpath: string; // "#Heading" / "#^id" / ""
  label: string | null; // the alias / the markdown link's text
}

const WIKI = /(!?)\[\[([^[\]\n]*)\]\]/g;
const MARKDOWN = /(!?)\[([^[\]\n]*)\]\(\s*<?([^()<>\n]*?)>?\s*\)/g;

export function findLinks(line: string): FoundLink[] {
  const found: FoundLink[] = [];
  for (const m of line.matchAll(WIKI)) {
    const inner = m[2];
    const bar = inner.indexOf("|");
    const left = bar < 0 ? inner : inner.slice(0, bar);
    const hash = left.indexOf("#");
    found.push({
      from: m.index!, to: m.index! + m[0].length, style: "wiki", embed: m[1] === "!",
      target: hash < 0 ? left : left.slice(0, hash), subpath: hash < 0 ? "" : left.slice(hash),
      label: bar < 0 ? null : inner.slice(bar + 1),
    });
  }
  for (const m of line.matchAll(MARKDOWN)) {
    if (found.some((f) => m.index! < f.to && f.from < m.index! + m[0].length)) continue;
    const url = m[3];
    if (/^[a-z][a-z0-9+.-]*:/i.test(url)) continue; // a web or app link
    const hash = url.indexOf("#");
    found.push({
      from: m.index!, to: m.index! + m[0].length, style: "markdown", embed: m[1] === "!",
      target: decode(hash < 0 ? url : url.slice(0, hash)), subpath: hash < 0 ? "" : url.slice(hash),
      label: m[2],
    });
  }
  return found.sort((a, b) => a.from - b.from);
}

/** One key for a target however it is spelled (vault2okf.report._target: trimmed, NFC, `/`, no `.md`, folded). */
export function targetKey(target: string): string {
  return stripMd(target.trim().normalize("NFC").replace(/\\/g, "/")).toLowerCase();
}

export interface Edit {
  line: number; // 0-based, as the editor counts
  from: number; // offsets in that line
  to: number;
  before: string; // the text replaced
  after: string; // the text put there
  oldLine: string;
  newLine: string;
}

export interface Refusal {
  problem: string;
}

/**
 * The edit that fixes `item` in `lineText` (the editor's line `item.line`), pointing it at `choice` (a vault path;
 * the item's first choice by default). `linkTo(path)` is the link text Obsidian would write for that note (its
 * file name when no other note shares it). Only that link, or the mention's words, change.
 */
export function planEdit(
  item: LinkItem,
  lineText: string,
  linkTo: (path: string) => string,
  choice: string | undefined = item.choices[0]?.path,
): Edit | Refusal {
  if (!choice) return { problem: `nothing to apply: ${item.why}` };
  if (item.kind === "mention") return planMention(item, lineText, linkTo(choice));
  const key = targetKey(item.target);
  const link = findLinks(lineText).find((l) => targetKey(l.target) === key);
  if (!link) {
    return { problem: `line ${item.line} no longer holds a link to “${item.target}”: the note changed since the bundle was converted` };
  }
  const before = lineText.slice(link.from, link.to);
  const target = linkTo(choice);
  const label = link.label ?? (item.kind === "alias" ? link.target : null);
  const after = link.style === "wiki"
    ? `${link.embed ? "!" : ""}[[${target}${link.subpath}${label !== null ? "|" + label : ""}]]`
    : `${link.embed ? "!" : ""}[${link.label ?? ""}](${encodeURI(choice).replace(/\(/g, "%28").replace(/\)/g, "%29")}${link.subpath})`;
  return edit(item.line - 1, lineText, link.from, link.to, after, before);
}

function planMention(item: LinkItem, lineText: string, target: string): Edit | Refusal {
  const words = item.mention?.text ?? "";
  const at = wordAt(lineText, words);
  if (at < 0) return { problem: `line ${item.line} no longer says “${words}” outside a link: the note changed since the bundle was converted` };
  const written = lineText.slice(at, at + words.length);
  const after = target === written ? `[[${target}]]` : `[[${target}|${written}]]`;
  return edit(item.line - 1, lineText, at, at + words.length, after, written);
}

/** Where `words` first stand as whole words outside links and inline code; -1 if nowhere. */
export function wordAt(line: string, words: string): number {
  if (!words) return -1;
  const covered = [...findLinks(line).map((l) => [l.from, l.to]), ...[...line.matchAll(/`[^`\n]*`/g)].map((m) => [m.index!, m.index! + m[0].length])];
  const folded = line.toLowerCase();
  for (const hay of [line, folded]) {
    const needle = hay === line ? words : words.toLowerCase();
    for (let at = hay.indexOf(needle); at >= 0; at = hay.indexOf(needle, at + 1)) {
      const end = at + needle.length;
      if (covered.some(([a, b]) => at < b && a < end)) continue;
      if (isWordChar(line[at - 1]) || isWordChar(line[end])) continue;
      return at;
    }
  }
  return -1;
}

function isWordChar(c: string | undefined): boolean {
  return c !== undefined && /[\p{L}\p{N}_]/u.test(c);
}

function edit(line: number, lineText: string, from: number, to: number, after: string, before: string): Edit {
  return { line, from, to, before, after, oldLine: lineText, newLine: lineText.slice(0, from) + after + lineText.slice(to) };
}

function decode(url: string): string {
  try {
    return decodeURIComponent(url);
  } catch {
    return url;
  }
}

export function isRefusal(plan: Edit | Refusal): plan is Refusal {
  return "problem" in plan;
}
