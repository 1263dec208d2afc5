/** Vault paths, note ids and Obsidian link text. Pure. */

const RESERVED = new Set(["index.md", "log.md"]); // vault2okf/bundle.py RESERVED: renamed "X (note).md" in the bundle

/** The bundle's note id of a vault path (`vault2okf.bundle.doc_path_for`, then `.md` dropped). */
export function noteIdFor(vaultPath: string): string {
  const slash = vaultPath.lastIndexOf("/");
  const folder = vaultPath.slice(0, slash + 1);
  let name = vaultPath.slice(slash + 1);
  if (name === ".md") name = "_untitled.md";
  else if (RESERVED.has(name.toLowerCase())) name = `${name.slice(0, -3)} (note).md`;
  return stripMd(folder + name);
}

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
