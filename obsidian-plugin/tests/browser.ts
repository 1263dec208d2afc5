/**
 * The three views rendered in headless chromium (Debian's) over the obsidian stub, answering from what the real
 * server answered: their DOM is checked (what is listed, what a click opens, the fix shown before it is applied)
 * and each is screenshotted: into $VAULT2OKF_SCREENSHOTS (`npm run screenshots`: ../reports), else a temporary folder.
 */
import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { promisify } from "node:util";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import { build } from "esbuild";
import type { Hit } from "../src/api";
import { type Vault2OkfClient } from "../src/client";
import { linkItems } from "../src/links-model";
import { linktext, stripMd } from "../src/paths";
import type { Recorded } from "./page/page";
import { PLUGIN, VAULTS, vaultNotes } from "./server-harness";

const VAULT = join(VAULTS, "children-of-ash");
const QUESTION = "Who attacked the convoy during the escort mission?";
const RELATED_NOTE = "Sessions/Session 9.md";

const run = promisify(execFile);

function chromium(): string | null {
  for (const exe of ["/usr/bin/chromium", "/usr/bin/chromium-browser"]) if (existsSync(exe)) return exe;
  const which = spawnSync("sh", ["-c", "command -v chromium || command -v chromium-browser"], { encoding: "utf-8" });
  return which.status === 0 ? which.stdout.trim() : null;
}

async function record(client: Vault2OkfClient, view: Recorded["view"]): Promise<Recorded> {
  const health = await client.health();
  let sources: Hit[] = [];
  const tokens: string[] = [];
  const done = await client.askStream(QUESTION, { onSources: (h) => (sources = h), onToken: (t) => tokens.push(t) });
  const full = await client.links();
  const counts = new Map<string, number>();
  for (const item of linkItems(full)) counts.set(item.source, (counts.get(item.source) ?? 0) + (item.kind === "mention" ? 1 : 3));
  const linksNote = [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0][0]; // broken links first
  const noteRefs: Recorded["noteRefs"] = {};
  for (const c of done.citations) {
    const n = await client.note(c.note_id);
    noteRefs[c.note_id] = { note_id: n.note_id, vault_path: n.vault_path };
  }
  const notes = vaultNotes(VAULT).map((n) => (n.path === linksNote || n.path === RELATED_NOTE ? n : { ...n, text: "" }));
  return {
    view, vaultName: "children-of-ash", vaultPath: VAULT, notes, health, question: QUESTION, sources, tokens, done,
    relatedNote: RELATED_NOTE, related: await client.related(stripMd(RELATED_NOTE), 10),
    linksNote, links: await client.links(linksNote), noteRefs,
  };
}

/** Records, renders, checks and screenshots the three views; a string says why it could not (no chromium). */
export async function recordAndRender(client: Vault2OkfClient, t: TestContext): Promise<string | null> {
  const exe = chromium();
  if (!exe) return "no chromium on this machine: run scripts/install_chromium.sh (Debian's chromium package)";
  const work = mkdtempSync(join(tmpdir(), "v2o-views-"));
  const shots = process.env.VAULT2OKF_SCREENSHOTS || join(work, "shots");
  mkdirSync(shots, { recursive: true });
  try {
    const bundle = await build({
      entryPoints: [join(PLUGIN, "tests", "page", "page.ts")], bundle: true, format: "iife", platform: "browser",
      target: "es2021", write: false, alias: { obsidian: join(PLUGIN, "tests", "obsidian-stub.ts") }, logLevel: "warning",
    });
    const script = bundle.outputFiles[0].text;
    const css = readFileSync(join(PLUGIN, "styles.css"), "utf-8") + readFileSync(join(PLUGIN, "tests", "page", "theme.css"), "utf-8");
    const results: Record<string, any> = {};
    const recorded = await record(client, "ask");
    for (const view of ["ask", "related", "links", "plugin"] as const) {
      const data = { ...recorded, view };
      const page = join(work, `${view}.html`);
      const json = JSON.stringify(data).replace(/</g, "\\u003c");
      writeFileSync(page, `<!doctype html><meta charset="utf-8"><style>${css}</style><body><script>window.V2O=${json};</script><script>${script.replace(/<\/script/gi, "<\\/script")}</script></body>`);
      const flags = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars", "--disable-extensions",
        "--disable-background-networking", `--user-data-dir=${join(work, "chrome")}`, "--virtual-time-budget=20000", "--window-size=1280,1000"];
      const shot = join(shots, `obsidian-${view}.png`);
      // asynchronous: the event loop keeps running (a blocked one misses the server closing idle connections)
      if (view !== "plugin") await run(flags[0], [...flags.slice(1), `--screenshot=${shot}`, `file://${page}`]);
      const dom = (await run(flags[0], [...flags.slice(1), "--dump-dom", `file://${page}`], { maxBuffer: 64 << 20 })).stdout;
      const m = /<script type="application\/json" id="v2o-result">([\s\S]*?)<\/script>/.exec(dom);
      assert.ok(m, `${view}: the page wrote no result`);
      const out = JSON.parse(m[1]);
      assert.ok(out.ok, out.error);
      results[view] = { data, ...out.result };
      if (view === "plugin") continue;
      assert.ok(statSync(shot).size > 10_000, `${shot} is a real picture`);
      t.diagnostic(`${view}: ${shot}`);
    }
    checkAsk(results.ask);
    checkRelated(results.related);
    checkLinks(results.links);
    checkPlugin(results.plugin);
    return null;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function checkAsk(r: any): void {
  const data: Recorded = r.data;
  assert.equal(r.phase, "done", r.error);
  assert.deepEqual(r.sources, data.sources.map((h) => linktext(h.vault_path, h.heading)), "every source listed, in order, opening its heading");
  assert.equal(r.citations.length, data.done.citations.length);
  for (const href of r.citations) assert.ok(existsSync(join(VAULT, href.split("#")[0] + ".md")), `${href} is a file of the vault`);
  assert.equal(r.answer, data.done.answer);
  assert.deepEqual(r.opened, [r.citations[0]], "clicking the first citation opened it");
  assert.match(r.copy, /Copy answer with citations as markdown/);
}

function checkRelated(r: any): void {
  const data: Recorded = r.data;
  assert.equal(r.phase, "done", r.error);
  const expected = data.related.related.filter((x) => x.vault_path !== data.relatedNote);
  assert.deepEqual(r.items.map((i: any) => i.href), expected.map((x) => stripMd(x.vault_path)));
  assert.deepEqual(r.items.map((i: any) => i.why), expected.map((x) => x.why));
  assert.deepEqual(r.opened, [stripMd(expected[0].vault_path)]);
}

function checkLinks(r: any): void {
  const data: Recorded = r.data;
  assert.equal(r.phase, "done", r.error);
  const items = linkItems(data.links, data.linksNote);
  assert.deepEqual(r.items.map((i: any) => i.line), items.map((i) => `line ${i.line}`));
  assert.ok(r.modal, "Apply showed the change first");
  const first = items.find((i) => i.choices.length)!;
  const line = readFileSync(join(VAULT, data.linksNote), "utf-8").split("\n")[first.line - 1];
  assert.equal(r.modal.old, `− ${line}`, "the modal shows the line as it is in the vault file");
  assert.notEqual(r.modal.new, r.modal.old);
  assert.equal(r.editorChanges, 0, "nothing is changed before Apply is pressed in the modal");
  assert.deepEqual(r.opened.at(-1), [stripMd(data.linksNote), first.line - 1], "the note opened at the item's line");
}

function checkPlugin(r: any): void {
  const data: Recorded = r.data;
  assert.equal(r.status.level, "ok", r.status.text);
  assert.deepEqual(r.statusAtStart, ["/health"], "the plugin checks the server once loaded");
  const bundle = data.health.bundles[0].name;
  const asked = (note: string) => [`/links?bundle=${bundle}&note=${note}`, `/related/${note}?bundle=${bundle}&k=10`];
  assert.deepEqual([...r.onOpen].sort(), asked(data.relatedNote).sort(), "the panes ask for the note open when they open");
  assert.equal(r.active, data.linksNote);
  assert.deepEqual([...r.afterSwitch].sort(), asked(data.linksNote).sort(), "three notes in quick succession: one request per pane, for the last");
  assert.ok(r.headings.includes(`Related to ${stripMd(data.linksNote)}`), JSON.stringify(r.headings));
  assert.ok(r.linkItems > 0);
}
