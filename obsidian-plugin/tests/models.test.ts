import assert from "node:assert/strict";
import { test } from "node:test";
import { answerMarkdown, blockOf, citationLinks, pathsOf, sourceItems } from "../src/ask-model";
import { findLinks, isRefusal, linkItems, planEdit, wordAt, type Edit } from "../src/links-model";
import { headingSubpath, linktext, parseAt } from "../src/paths";
import { relatedItems, whyText } from "../src/related-model";
import { ServerError } from "../src/client";
import { pickBundle, serverStatus } from "../src/status";
import { ASK, HEALTH, HITS, NOTES, RELATED, REPORT } from "./fixtures";

const S3 = "Sessions/Session 3.md";
const lineOf = (n: number) => NOTES[0].text.split("\n")[n - 1];
const shortest = (path: string) => path.replace(/\.md$/, "").split("/").pop()!;

test("at-lines split into vault path and line", () => {
  assert.deepEqual(parseAt("A: b/Note.md:12"), { path: "A: b/Note.md", line: 12 });
  assert.equal(parseAt("no line"), null);
});

test("link text for openLinkText: heading subpaths lose what a link cannot hold, blocks get #^", () => {
  assert.equal(linktext("Sessions/Session 3.md", "Loot"), "Sessions/Session 3#Loot");
  assert.equal(linktext("A.md", "Gates: North | [old]"), "A#Gates North old");
  assert.equal(linktext("A.md", "ignored", "blk-1"), "A#^blk-1");
  assert.equal(headingSubpath("  a#b^c  "), "a b c");
});

test("sources keep the server's order and say why each is there", () => {
  const items = sourceItems(HITS);
  assert.deepEqual(items.map((i) => i.label), ["Session 3 › Loot", "Tezha Olai"]);
  assert.deepEqual(items.map((i) => i.linktext), ["Sessions/Session 3#Loot", "NPCs/Tezha Olai"]);
  assert.equal(items[0].why, "found by the search");
  assert.equal(items[1].why, "linked with Session 3");
});

test("citations open their note at the heading, or at the block their quote ends with", () => {
  const links = citationLinks(ASK.citations, pathsOf(HITS));
  assert.equal(blockOf(ASK.citations[0]), "loot-1");
  assert.equal(links[0].linktext, "Sessions/Session 3#^loot-1");
  assert.equal(links[1].linktext, "NPCs/Tezha Olai");
  assert.equal(links[2].linktext, null, "a note not among the sources is unresolved until /notes says where it is");
  const resolved = citationLinks(ASK.citations, new Map([...pathsOf(HITS), ["Places/Far Away", "Places/Far Away.md"]]));
  assert.equal(resolved[2].linktext, "Places/Far Away#Gates North");
  assert.deepEqual(resolved.map((l) => l.n), [1, 2, 3]);
});

test("the markdown copy: links to cited notes become wikilinks, sources numbered as the answer's [n]", () => {
  const links = citationLinks(ASK.citations, new Map([...pathsOf(HITS), ["Places/Far Away", "Places/Far Away.md"]]));
  const md = answerMarkdown(ASK, links);
  assert.match(md, /^\*\*Question:\*\* What did they find\?\n/);
  assert.ok(md.includes("See [[NPCs/Tezha Olai|Tezha Olai]]."), md);
  assert.ok(!md.includes("](concepts/"), "no markdown link into the bundle is left");
  assert.ok(md.includes("[1]"), "the answer's markers are kept");
  assert.ok(md.includes("1. [[Sessions/Session 3#^loot-1|Session 3 › Loot]]"), md);
  assert.ok(md.includes("2. [[NPCs/Tezha Olai|Tezha Olai]]"), md);
  assert.ok(md.includes("3. [[Places/Far Away#Gates North|Far Away › Gates: North]]"), md);
});

test("related notes: the active note left out, the link graph's reasons first", () => {
  const items = relatedItems(RELATED, S3);
  assert.deepEqual(items.map((i) => i.title), ["Tezha Olai", "Far Away"]);
  assert.equal(items[0].whyText, "links here · similar text");
  assert.equal(items[1].linktext, "Places/Far Away");
  assert.equal(whyText(["similar text", "linked from here", "something new"]), "linked from here · similar text · something new");
});

test("link items of one note, by line, each kind with its choices; other notes' entries left out", () => {
  const items = linkItems(REPORT, S3);
  assert.deepEqual(items.map((i) => [i.line, i.kind]), [
    [5, "ambiguous"], [5, "broken"], [5, "missing-block"], [6, "broken"], [7, "mention"], [8, "alias"],
  ]);
  const ambiguous = items[0];
  assert.deepEqual(ambiguous.choices.map((c) => c.path), ["Places/Gate.md", "Places/North/Gate.md"]);
  assert.equal(items[2].choices.length, 0, "a missing block has nothing to apply");
  assert.equal(linkItems(REPORT).length, items.length + 1, "the vault-wide list has the other note's entry too");
  for (const item of items) assert.ok(item.line >= 1 && item.line <= NOTES[0].text.split("\n").length);
});

function applied(edit: Edit): string {
  return edit.oldLine.slice(0, edit.from) + edit.after + edit.oldLine.slice(edit.to);
}

test("apply: a broken wikilink is re-pointed, its alias kept, nothing else on the line changes", () => {
  const item = linkItems(REPORT, S3).find((i) => i.kind === "broken" && i.line === 5)!;
  const edit = planEdit(item, lineOf(5), shortest);
  assert.ok(!isRefusal(edit));
  assert.equal(edit.before, "[[Tezah Olai|the smith]]");
  assert.equal(edit.after, "[[Tezha Olai|the smith]]");
  assert.equal(edit.line, 4, "the editor counts lines from 0");
  assert.equal(edit.newLine, "We met [[Tezha Olai|the smith]] near the [[Gate]] and [[Far Away#Gates]].");
  assert.equal(applied(edit), edit.newLine);
});

test("apply: an ambiguous link gets the full path of the chosen note; a broken markdown link keeps its text", () => {
  const items = linkItems(REPORT, S3);
  const amb = items.find((i) => i.kind === "ambiguous")!;
  const edit = planEdit(amb, lineOf(5), (p) => p.replace(/\.md$/, ""), "Places/North/Gate.md");
  assert.ok(!isRefusal(edit));
  assert.equal(edit.before, "[[Gate]]");
  assert.equal(edit.after, "[[Places/North/Gate]]");
  const md = planEdit(items.find((i) => i.line === 6)!, lineOf(6), shortest);
  assert.ok(!isRefusal(md));
  assert.equal(md.before, "[Old Mill](./Old%20Mill.md)");
  assert.equal(md.after, "[Old Mill](Places/The%20Old%20Mill.md)");
});

test("apply: an alias-only link keeps what it shows; a mention links its words, not the ones in code or links", () => {
  const items = linkItems(REPORT, S3);
  const alias = planEdit(items.find((i) => i.kind === "alias")!, lineOf(8), shortest);
  assert.ok(!isRefusal(alias));
  assert.equal(alias.after, "[[Forge|Smithy]]");
  const mention = items.find((i) => i.kind === "mention")!;
  const m = planEdit(mention, lineOf(7), shortest);
  assert.ok(!isRefusal(m));
  assert.equal(m.from, 0);
  assert.equal(m.newLine, "[[Tezha Olai]] gave us a key, and [[Tezha Olai]] laughed.");
  assert.equal(wordAt("`Tezha Olai` and [[Tezha Olai]] but Tezha Olais", "Tezha Olai"), -1, "code, links and longer words are not the name");
});

test("apply refuses when the line no longer holds the link, and when there is nothing to point at", () => {
  const items = linkItems(REPORT, S3);
  const broken = items.find((i) => i.kind === "broken" && i.line === 5)!;
  const gone = planEdit(broken, "This line was rewritten.", shortest);
  assert.ok(isRefusal(gone) && /no longer holds a link/.test(gone.problem));
  const block = planEdit(items.find((i) => i.kind === "missing-block")!, lineOf(5), shortest);
  assert.ok(isRefusal(block) && /nothing to apply/.test(block.problem));
});

test("findLinks: wikilinks, embeds, markdown links; web links left alone", () => {
  const found = findLinks("![[Pic.png]] [[A#H|x]] [t](B.md#Sec) [w](https://e.org) [[C]]");
  assert.deepEqual(found.map((l) => [l.style, l.embed, l.target, l.subpath, l.label]), [
    ["wiki", true, "Pic.png", "", null],
    ["wiki", false, "A", "#H", "x"],
    ["markdown", false, "B.md", "#Sec", "t"],
    ["wiki", false, "C", "", null],
  ]);
});

test("status: the bundle of this vault is picked; stale, index missing, no such bundle, down and token say so", () => {
  const newest = { path: "Sessions/Session 3.md", mtime: Date.parse("2026-12-04T16:00:00Z") };
  const ok = serverStatus({ health: HEALTH, wanted: "", vaultPath: "/vaults/coa/", newest });
  assert.equal(ok.level, "ok");
  assert.equal(ok.bundle?.name, "coa");
  const named = { ...HEALTH, bundles: [{ ...HEALTH.bundles[0], vault: "coa" }, HEALTH.bundles[1]] };
  assert.equal(serverStatus({ health: named, wanted: "", vaultPath: "/home/me/coa", newest }).bundle?.name, "coa", "a vault named by its folder's name");
  const elsewhere = serverStatus({ health: named, wanted: "coa", vaultPath: "/home/me/other", newest });
  assert.match(elsewhere.text, /converted from coa, not from this vault/);
  const later = { path: "New.md", mtime: Date.parse("2026-12-04T17:30:00Z") };
  const stale = serverStatus({ health: HEALTH, wanted: "", vaultPath: "/vaults/coa", newest: later });
  assert.equal(stale.level, "warn");
  assert.match(stale.text, /stale.*New\.md changed 2026-12-04 17:30.*vault2okf convert \/vaults\/coa -o \/b\/coa/);
  const missing = serverStatus({ health: HEALTH, wanted: "other", vaultPath: null, newest: null });
  assert.match(missing.text, /index missing.*vault2okf index \/b\/other/);
  assert.match(serverStatus({ health: HEALTH, wanted: "nope", vaultPath: null, newest: null }).text, /no bundle "nope".*coa, other/);
  assert.match(pickBundle(HEALTH, "", "/elsewhere") as string, /choose one in the settings/);
  const down = serverStatus({ error: new ServerError("down", "x"), wanted: "", vaultPath: null, newest: null });
  assert.equal(down.level, "error");
  assert.match(down.text, /not running: start it with `vault2okf serve BUNDLE`/);
  const token = serverStatus({ error: new ServerError("token", "wrong token (missing or wrong token): ..."), wanted: "", vaultPath: null, newest: null });
  assert.match(token.text, /wrong token/);
});
