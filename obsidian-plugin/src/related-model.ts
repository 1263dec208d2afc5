/** The Related view's model: the notes the server relates to the active note, each with why. Pure. */
import type { Related, RelatedWhy } from "./api";
import { linktext } from "./paths";

export interface RelatedItem {
  noteId: string;
  title: string;
  vaultPath: string;
  linktext: string;
  score: number;
  why: RelatedWhy[];
  whyText: string; // "similar text · links here"
}

/** The order the reasons are shown in: the link graph's first, then what the text says. */
const WHY_ORDER: RelatedWhy[] = ["links here", "linked from here", "named here without a link", "similar text"];

export function whyText(why: readonly string[]): string {
  const known = WHY_ORDER.filter((w) => why.includes(w));
  const other = why.filter((w) => !WHY_ORDER.includes(w as RelatedWhy));
  return [...known, ...other].join(" · ");
}

/** The related notes in the server's order, the active note itself never among them. */
export function relatedItems(related: Related, activePath: string): RelatedItem[] {
  return related.related
    .filter((r) => r.vault_path !== activePath)
    .map((r) => ({
      noteId: r.note_id,
      title: r.title,
      vaultPath: r.vault_path,
      linktext: linktext(r.vault_path),
      score: r.score,
      why: r.why,
      whyText: whyText(r.why),
    }));
}
