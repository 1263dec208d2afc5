/** The Ask view's model: the sources list, the citations as places to open, the answer as markdown. Pure. */
import type { AskResult, Citation, Hit } from "./api";
import { linktext, wikilink } from "./paths";

export interface SourceItem {
  noteId: string;
  title: string;
  heading: string;
  label: string; // "Session 3 › Loot"
  snippet: string;
  why: string; // "found by the search" / "linked from Session 3"
  score: number;
  vaultPath: string;
  linktext: string; // what openLinkText opens: "Sessions/Session 3#Loot"
}

export function label(title: string, heading: string): string {
  return heading ? `${title} › ${heading}` : title;
}

/** The retrieved notes, in the server's order, each with why it is there. */
export function sourceItems(hits: Hit[]): SourceItem[] {
  const titles = new Map(hits.map((h) => [h.note_id, h.title]));
  return hits.map((h) => ({
    noteId: h.note_id,
    title: h.title,
    heading: h.heading,
    label: label(h.title, h.heading),
    snippet: h.snippet,
    why: h.via === "hop" && h.seed ? `linked with ${titles.get(h.seed) ?? h.seed}` : "found by the search",
    score: h.score,
    vaultPath: h.vault_path,
    linktext: linktext(h.vault_path, h.heading),
  }));
}

export interface CitationLink {
  n: number; // 1-based: the answer's [n]
  noteId: string;
  label: string;
  quote: string;
  vaultPath: string | null; // null while unknown (not among the sources; the view asks /notes for it)
  linktext: string | null;
}

const BLOCK_AT_END = /\s\^([A-Za-z0-9-]+)\s*$/;

/** The block id a citation points at: a heading written `^id`, or a quote that ends with its block's ` ^id`. */
export function blockOf(citation: Citation): string {
  if (citation.heading.startsWith("^")) return citation.heading.slice(1);
  return BLOCK_AT_END.exec(citation.quote)?.[1] ?? "";
}

/** Each citation with the vault file and place it opens; `paths` maps note ids to vault paths. */
export function citationLinks(citations: Citation[], paths: ReadonlyMap<string, string>): CitationLink[] {
  return citations.map((c, i) => {
    const vaultPath = paths.get(c.note_id) ?? null;
    const block = blockOf(c);
    const heading = c.heading.startsWith("^") ? "" : c.heading;
    return {
      n: i + 1,
      noteId: c.note_id,
      label: label(c.title, heading),
      quote: c.quote,
      vaultPath,
      linktext: vaultPath === null ? null : linktext(vaultPath, heading, block),
    };
  });
}

/** note id -> vault path, from the hits that came with the answer. */
export function pathsOf(hits: Pick<Hit, "note_id" | "vault_path">[]): Map<string, string> {
  return new Map(hits.map((h) => [h.note_id, h.vault_path]));
}

const MD_LINK = /\[([^\]\n]+)\]\(<?([^()<>\s]+(?:\s[^()<>]*)?)>?\)/g;

/**
 * The answer as markdown to paste into a note: the question, the answer with its links to cited notes turned
 * into wikilinks, and the numbered sources (`[n]` in the answer) as wikilinks to their heading or block.
 */
export function answerMarkdown(result: AskResult, links: CitationLink[]): string {
  const byPath = new Map<string, CitationLink>();
  result.citations.forEach((c, i) => {
    if (links[i]?.linktext) byPath.set(normalisePath(c.path), links[i]);
  });
  const answer = result.answer.replace(MD_LINK, (whole, text: string, url: string) => {
    const link = byPath.get(normalisePath(url.split("#")[0]));
    return link?.linktext ? wikilink(link.linktext, text) : whole;
  });
  const lines = [`**Question:** ${result.question.trim()}`, "", answer.trim()];
  if (links.length) {
    lines.push("", "**Sources**");
    for (const link of links) {
      const ref = link.linktext ? wikilink(link.linktext, link.label) : link.label;
      lines.push(`${link.n}. ${ref}`);
    }
  }
  return lines.join("\n") + "\n";
}

function normalisePath(path: string): string {
  let p = path.trim();
  try {
    p = decodeURIComponent(p);
  } catch {
    // a stray % : compare as written
  }
  return p.replace(/^\.\//, "");
}
