/** Small contract-shaped answers of `vault2okf serve` (docs: the HTTP API), for the tests that need no server. */
import type { AskResult, Health, Hit, LinkReport, Related } from "../src/api";

export function hit(over: Partial<Hit> & { note_id: string }): Hit {
  const vault_path = over.vault_path ?? over.note_id + ".md";
  return {
    title: over.note_id.split("/").pop()!,
    heading: "",
    score: 0.5,
    via: "vector",
    seed: null,
    snippet: "",
    doc_path: "concepts/" + vault_path,
    vault_path,
    obsidian_uri: "obsidian://open?vault=v&file=" + encodeURIComponent(vault_path.slice(0, -3)),
    tokens: 10,
    ...over,
  };
}

export const HITS: Hit[] = [
  hit({ note_id: "Sessions/Session 3", heading: "Loot", score: 0.81, snippet: "They found a rusted key." }),
  hit({ note_id: "NPCs/Tezha Olai", score: 0.44, via: "hop", seed: "Sessions/Session 3" }),
];

export const ASK: AskResult = {
  question: "What did they find?",
  answer: 'Session 3 › Loot: "They found a rusted key. ^loot-1" [1]\nSee [Tezha Olai](concepts/NPCs/Tezha%20Olai.md).',
  not_found: false,
  supported: true,
  citations: [
    { note_id: "Sessions/Session 3", heading: "Loot", title: "Session 3", path: "concepts/Sessions/Session 3.md", quote: "They found a rusted key. ^loot-1", ref: "Sessions/Session 3#Loot" },
    { note_id: "NPCs/Tezha Olai", heading: "", title: "Tezha Olai", path: "concepts/NPCs/Tezha Olai.md", quote: "", ref: "NPCs/Tezha Olai" },
    { note_id: "Places/Far Away", heading: "Gates: North", title: "Far Away", path: "concepts/Places/Far Away.md", quote: "", ref: "Places/Far Away#Gates: North" },
  ],
  retrieved: HITS,
  model: "extract",
};

export const HEALTH: Health = {
  status: "ok",
  version: "0.1.0",
  bundles: [
    { name: "coa", path: "/b/coa", vault: "/vaults/coa", converted_at: "2026-12-04T17:00:00+00:00", notes: 38, chunks: 64, index: "ready", generation: "g1" },
    { name: "other", path: "/b/other", vault: "/vaults/other", converted_at: null, notes: 5, chunks: 5, index: "missing", generation: "g2" },
  ],
  models: { embedder: "minilm", answerer: "extract" },
};

export const RELATED: Related = {
  note_id: "Sessions/Session 3",
  related: [
    { note_id: "NPCs/Tezha Olai", title: "Tezha Olai", vault_path: "NPCs/Tezha Olai.md", obsidian_uri: "", score: 0.7, why: ["similar text", "links here"] },
    { note_id: "Sessions/Session 3", title: "Session 3", vault_path: "Sessions/Session 3.md", obsidian_uri: "", score: 1, why: ["similar text"] },
    { note_id: "Places/Far Away", title: "Far Away", vault_path: "Places/Far Away.md", obsidian_uri: "", score: 0.3, why: ["named here without a link"] },
  ],
};

/** The vault the link tests edit. */
export const NOTES = [
  {
    path: "Sessions/Session 3.md",
    text: [
      "---",
      "tags: [session]",
      "---",
      "# Session 3",
      "We met [[Tezah Olai|the smith]] near the [[Gate]] and [[Far Away#Gates]].",
      "The road to [Old Mill](./Old%20Mill.md) was long; `Tezha Olai` said so.",
      "Tezha Olai gave us a key, and [[Tezha Olai]] laughed.",
      "Here [[Smithy]] is named by its alias.",
    ].join("\n"),
    mtime: Date.parse("2026-12-04T16:00:00Z"),
  },
  { path: "NPCs/Tezha Olai.md", text: "# Tezha Olai\nA smith.", mtime: Date.parse("2026-12-04T16:00:00Z") },
  { path: "Places/Gate.md", text: "# Gate", mtime: 0 },
  { path: "Places/North/Gate.md", text: "# Gate", mtime: 0 },
  { path: "Places/Far Away.md", text: "# Far Away\n## Gates", mtime: 0 },
  { path: "Places/The Old Mill.md", text: "# The Old Mill", mtime: 0 },
  { path: "Places/Forge.md", text: "---\naliases: [Smithy]\n---\n# Forge", mtime: 0 },
];

const S3 = "Sessions/Session 3.md";

export const REPORT: LinkReport = {
  vault: "coa",
  totals: { notes: 7, links: 6, resolved_share: 0.5, by_status: {} },
  broken: [
    {
      target: "Tezah Olai", count: 1, at: [`${S3}:5`],
      suggestions: [{ path: "NPCs/Tezha Olai.md", name: "Tezha Olai", why: "one letter apart", score: 0.9, confident: true }],
      fix: { path: "NPCs/Tezha Olai.md", why: "one letter apart" },
    },
    {
      target: "./Old Mill", count: 1, at: [`${S3}:6`],
      suggestions: [{ path: "Places/The Old Mill.md", name: "The Old Mill", why: "same name apart from a leading 'the'", score: 1, confident: true }],
      fix: { path: "Places/The Old Mill.md", why: "same name apart from a leading 'the'" },
    },
    { target: "Nowhere", count: 1, at: ["Other.md:3"], suggestions: [] },
  ],
  ambiguous: [
    { target: "Gate", count: 1, candidates: ["Places/Gate.md", "Places/North/Gate.md"], chosen: ["Places/Gate.md"], at: [`${S3}:5`] },
  ],
  alias_only: [{ target: "Smithy", count: 1, note: "Places/Forge.md", at: [`${S3}:8`] }],
  missing_blocks: [{ target: "Far Away#^nope", count: 1, note: "Places/Far Away.md", why: "no block ^nope", at: [`${S3}:5`] }],
  mentions: {
    total: 1,
    by_note: [
      { note: S3, count: 1, mentions: [{ target: "NPCs/Tezha Olai.md", text: "Tezha Olai", line: 7, heading: "Session 3", count: 2, link: "[[Tezha Olai]]" }] },
    ],
  },
};
