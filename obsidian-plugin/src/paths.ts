/** Vault paths and Obsidian link text. Pure. (Note ids: the server resolves a vault path to its note.) */

export function stripMd(path: string): string {
  return path.toLowerCase().endsWith(".md") ? path.slice(0, -3) : path;
}

/** A heading as Obsidian writes it after `#` in a link: the characters a link cannot hold become spaces. */
export function headingSubpath(heading: string): string {
  return heading.replace(/[#|^:[\]]|%%/g, " ").replace(/\s+/g, " ").trim();
}

/** `Folder/Note#Heading`, `Folder/Note#^block` or `Folder/Note`: what `openLinkText` opens. */
export function linktext(vaultPath: string, heading = "", block = ""): string {
  const base = stripMd(vaultPath);
  if (block) return `${base}#^${block}`;
  const sub = headingSubpath(heading);
  return sub ? `${base}#${sub}` : base;
}

/** `[[target|label]]`, the label kept out when it says the same; `|` and brackets in the label made harmless. */
export function wikilink(target: string, label?: string): string {
  const shown = (label ?? "").replace(/\|/g, "/").replace(/\[\[|\]\]/g, "").trim();
  return shown && shown !== target ? `[[${target}|${shown}]]` : `[[${target}]]`;
}

/** `Folder/Note.md:12` -> the path and the line (1-based); null when it is not that shape. */
export function parseAt(at: string): { path: string; line: number } | null {
  const m = /^(.*):(\d+)$/.exec(at);
  return m ? { path: m[1], line: Number(m[2]) } : null;
}
