/** The shapes of `vault2okf serve`'s JSON (docs: the HTTP API contract, v1). Only the fields the plugin reads. */

export interface BundleInfo {
  name: string;
  path: string;
  vault: string | null;
  converted_at: string | null;
  notes: number;
  chunks: number;
  index: string; // "ready" | "missing" | another state
  generation: string;
}

export interface Health {
  status: string;
  version: string;
  bundles: BundleInfo[];
  models: { embedder: string | null; answerer: string | null };
}

export interface Hit {
  note_id: string;
  title: string;
  heading: string;
  score: number;
  via: "vector" | "hop" | string;
  seed: string | null;
  snippet: string;
  doc_path: string;
  vault_path: string;
  obsidian_uri: string;
  tokens: number;
}

export interface Citation {
  note_id: string;
  heading: string;
  title: string;
  path: string;
  quote: string;
  ref: string;
}

export interface AskResult {
  question: string;
  answer: string;
  not_found: boolean;
  supported?: boolean | null;
  citations: Citation[];
  retrieved?: Hit[];
  model?: string;
  timings_ms?: Record<string, number>;
}

export interface NoteRef {
  note_id: string;
  title: string;
  vault_path: string;
}

export interface Note extends NoteRef {
  type: string;
  frontmatter: Record<string, unknown>;
  text: string;
  html: string;
  doc_path: string;
  obsidian_uri: string;
  links_out: NoteRef[];
  links_in: NoteRef[];
}

export type RelatedWhy = "similar text" | "links here" | "linked from here" | "named here without a link";

export interface RelatedNote extends NoteRef {
  obsidian_uri: string;
  score: number;
  why: RelatedWhy[];
}

export interface Related {
  note_id: string;
  related: RelatedNote[];
}

export interface Suggestion {
  path: string;
  name: string;
  why: string;
  score: number;
  confident: boolean;
}

export interface Fix {
  path: string;
  why: string;
}

export interface BrokenEntry {
  target: string;
  count: number;
  at: string[];
  suggestions?: Suggestion[];
  fix?: Fix;
}

export interface AmbiguousEntry {
  target: string;
  count: number;
  candidates: string[];
  chosen: string[];
  at: string[];
  fix?: Fix;
}

export interface NoteEntry {
  target: string;
  count: number;
  note: string | null;
  at: string[];
  why?: string;
}

export interface MentionItem {
  target: string;
  text: string;
  line: number;
  heading: string | null;
  count: number;
  link: string;
}

export interface LinkReport {
  vault: string;
  totals: { notes: number; links: number; resolved_share: number; by_status: Record<string, number> };
  broken: BrokenEntry[];
  ambiguous: AmbiguousEntry[];
  alias_only: NoteEntry[];
  missing_blocks: NoteEntry[];
  missing_attachments?: BrokenEntry[];
  mentions: { total: number; by_note: { note: string; count: number; mentions: MentionItem[] }[] };
}

export interface SearchOptions {
  k?: number;
  mode?: "vector" | "graph" | "union";
  filters?: { type?: string[]; tag?: string[]; folder?: string[]; since?: string; until?: string };
}
