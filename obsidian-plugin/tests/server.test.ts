/**
 * The plugin's client and views' behaviour against a REAL `vault2okf serve` on the shared children-of-ash vault:
 * sources, a streamed answer, citations that resolve to files of the vault, related notes, link-health items whose
 * lines are right in the vault's files, the status line (fine, stale, wrong token, stopped server).
 * Skipped, saying why, where `vault2okf serve` cannot run (tests/server-harness.ts).
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { AskResult, Hit } from "../src/api";
import { AskController } from "../src/ask-controller";
import { type Fetch, ServerError, Vault2OkfClient } from "../src/client";
import { LinksController } from "../src/links-controller";
import { findLinks, isRefusal, linkItems, targetKey, wordAt } from "../src/links-model";
import Vault2OkfPlugin from "../src/main";
import { RelatedController } from "../src/related-controller";
import { obsidianHttp } from "../src/transport";
import { App, MarkdownView, setRequestUrl, type StubEditor } from "./obsidian-stub";
import { cannotServe, makeBundle, type Server, startServer, VAULTS, vaultNotes } from "./server-harness";
import { recordAndRender } from "./browser";

const VAULT = join(VAULTS, "children-of-ash");
const TOKEN = "plugin-test-token";
const QUESTION = "Who attacked the convoy during the escort mission?";
const why = cannotServe(VAULT);

// requestUrl, as the stub gives it to the plugin: here a real HTTP request (Node's fetch).
setRequestUrl(async (req) => {
  const r = await fetch(req.url, { method: req.method ?? "GET", headers: req.headers, body: req.body });
  return { status: r.status, text: await r.text() };
});

const corsSeen: (string | null)[] = [];
/** Obsidian's window fetch: its requests carry Origin app://obsidian.md. */
const appFetch: Fetch = async (url, init) => {
  const r = await fetch(url, { ...init, headers: { ...init.headers, Origin: "app://obsidian.md" } });
  corsSeen.push(r.headers.get("access-control-allow-origin"));
  return r;
};

function headingsOf(text: string): string[] {
  return text.split("\n").filter((l) => /^#{1,6}\s/.test(l)).map((l) => l.replace(/^#+\s+/, "").trim());
}

describe("against a real vault2okf serve", { skip: why ?? false }, () => {
  let server: Server;
  let bundle: { path: string; remove: () => void };
  const notes = why ? [] : vaultNotes(VAULT);
  const app = new App(notes, VAULT);
  const client = (token = TOKEN) => new Vault2OkfClient({ url: server.url, token, http: obsidianHttp, fetch: appFetch });

  before(async () => {
    bundle = makeBundle(VAULT);
    server = await startServer(bundle.path, TOKEN);
  });
  after(async () => {
    await server?.stop();
    bundle?.remove();
  });

  test("health: the bundle is ready, and the plugin's status line says so for this vault", async () => {
    const health = await client().health();
    assert.equal(health.bundles.length, 1);
    assert.equal(health.bundles[0].index, "ready");
    assert.ok(health.bundles[0].converted_at, "the server says when the bundle was converted");
    const plugin = new Vault2OkfPlugin(app as never, {} as never);
    plugin.settings = { serverUrl: server.url, token: TOKEN, bundle: "", relatedCount: 10 };
    const status = await plugin.checkServer();
    assert.equal(status.level, "ok", status.text);
    assert.equal(status.bundle?.name, health.bundles[0].name);
    assert.equal(plugin.client().bundle, health.bundles[0].name, "the plugin then asks that bundle by name");
  });

  test("status: a note changed after the conversion makes the bundle stale, naming the note", async () => {
    const edited = notes.map((n) => (n.path === "NPCs/Tezha Olai.md" ? { ...n, mtime: Date.now() + 60_000 } : n));
    const plugin = new Vault2OkfPlugin(new App(edited, VAULT) as never, {} as never);
    plugin.settings = { serverUrl: server.url, token: TOKEN, bundle: "", relatedCount: 10 };
    const status = await plugin.checkServer();
    assert.equal(status.level, "warn");
    assert.match(status.text, /stale: converted .* but NPCs\/Tezha Olai\.md changed .*vault2okf convert/);
  });

  test("search: every hit is a file of the vault", async () => {
    const { hits } = await client().search(QUESTION, { k: 5 });
    assert.ok(hits.length >= 1);
    for (const h of hits) assert.ok(existsSync(join(VAULT, h.vault_path)), h.vault_path);
  });

  test("streamed ask: sources first, then the answer's pieces, then citations that open files of the vault", async () => {
    const order: string[] = [];
    let sources: Hit[] = [];
    let pieces = "";
    const result: AskResult = await client().askStream(QUESTION, {
      onSources: (hits) => {
        order.push("sources");
        sources = hits;
      },
      onToken: (t) => {
        order.push("token");
        pieces += t;
      },
    });
    assert.equal(order[0], "sources");
    assert.ok(order.includes("token"), "at least one piece of answer streamed");
    assert.equal(pieces, result.answer, "the pieces make the answer");
    assert.ok(sources.length >= 1 && result.citations.length >= 1, JSON.stringify(result).slice(0, 300));
    assert.ok(corsSeen.length > 0 && corsSeen.every((h) => h === "app://obsidian.md"), `CORS for Obsidian: ${corsSeen}`);
    const preflight = await fetch(server.url + "/ask", {
      method: "OPTIONS",
      headers: { Origin: "app://obsidian.md", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type,accept" },
    });
    assert.ok(preflight.ok, `preflight ${preflight.status}`);
    assert.equal(preflight.headers.get("access-control-allow-origin"), "app://obsidian.md");
    const allowed = (preflight.headers.get("access-control-allow-headers") ?? "").toLowerCase();
    for (const h of ["authorization", "content-type", "accept"]) assert.ok(allowed.includes(h), `${h} allowed: ${allowed}`);

    // the Ask view's behaviour on the same question: each citation opens a file of the vault, at a heading it has
    const c = new AskController({ app: app as never, client: () => client(), onChange: () => {} });
    await c.ask(QUESTION);
    assert.equal(c.state.phase, "done", c.state.error);
    for (const link of c.state.citations) {
      assert.ok(link.vaultPath && existsSync(join(VAULT, link.vaultPath)), `${link.label}: ${link.vaultPath}`);
      await c.openCitation(link);
      const opened = app.workspace.opened.at(-1)!.linktext;
      const [file, sub] = opened.split("#");
      assert.equal(app.workspace.getActiveFile()?.path, link.vaultPath, `${opened} opened its note`);
      assert.equal(file + ".md", link.vaultPath);
      if (sub && !sub.startsWith("^")) {
        const headings = headingsOf(readFileSync(join(VAULT, link.vaultPath!), "utf-8")).map((h) => h.replace(/[#|^:[\]]/g, " ").replace(/\s+/g, " ").trim());
        assert.ok(headings.includes(sub), `#${sub} is a heading of ${link.vaultPath}: ${headings.join(" / ")}`);
      }
    }
    const md = c.markdown();
    for (const link of c.state.citations) assert.ok(md.includes(`[[${link.linktext}|`), md);
  });

  test("related: notes of the vault, not the note itself, each with a reason the link graph confirms", async () => {
    const path = "Sessions/Session 9.md";
    const rc = new RelatedController({ app: app as never, client: () => client(), onChange: () => {}, k: 20 });
    await rc.refresh(path);
    assert.equal(rc.state.phase, "done", rc.state.error);
    assert.ok(rc.state.items.length >= 3);
    const text = readFileSync(join(VAULT, path), "utf-8");
    for (const item of rc.state.items) {
      assert.notEqual(item.vaultPath, path);
      assert.ok(existsSync(join(VAULT, item.vaultPath)), item.vaultPath);
      assert.ok(item.why.length >= 1);
      if (item.why.includes("linked from here")) {
        const name = item.vaultPath.split("/").pop()!.replace(/\.md$/, "");
        const linked = text.includes(`[[${name}`) || text.includes(encodeURI(name)) || text.includes(`${name}.md`);
        assert.ok(linked, `${path} links ${name}`);
      }
    }
    assert.ok(rc.state.items.some((i) => i.why.some((w) => w !== "similar text")), "link neighbours or mentions are among them");
  });

  test("related: a note the bundle does not have yet says to re-convert", async () => {
    const rc = new RelatedController({ app: app as never, client: () => client(), onChange: () => {} });
    await rc.refresh("Sessions/Written after the conversion.md");
    assert.equal(rc.state.phase, "error");
    assert.match(rc.state.error, /Written after the conversion\.md is not in the bundle .*vault2okf convert/);
  });

  test("/links?note= restricts every section, mentions included", async () => {
    const own = await client().links("Locations/Virelian Wastes.md");
    assert.deepEqual(own.mentions.by_note.map((n) => n.note).filter((n) => n !== "Locations/Virelian Wastes.md"), []);
    const session = await client().links("Sessions/Session 9.md");
    assert.deepEqual(session.mentions.by_note.map((n) => n.note), ["Sessions/Session 9.md"]);
  });

  test("link health: each item's line in the vault file holds the link or the words it is about", async () => {
    const full = await client().links();
    const all = linkItems(full);
    assert.ok(all.length >= 3, "children-of-ash has broken links and unlinked mentions");
    for (const item of all) {
      const line = readFileSync(join(VAULT, item.source), "utf-8").split("\n")[item.line - 1];
      assert.ok(line !== undefined, `${item.source}:${item.line}`);
      if (item.kind === "mention") assert.ok(wordAt(line, item.mention!.text) >= 0, `${item.source}:${item.line} says ${item.mention!.text}`);
      else assert.ok(findLinks(line).some((l) => targetKey(l.target) === targetKey(item.target)), `${item.source}:${item.line} links ${item.target}`);
    }
    const note = "Locations/Virelian Wastes.md";
    const own = await client().links(note);
    assert.deepEqual(linkItems(own, note), all.filter((i) => i.source === note), "?note= gives that note's entries");
  });

  test("link health: apply fixes the broken link in the editor only, as one undoable change", async () => {
    const note = "Locations/Virelian Wastes.md";
    const lc = new LinksController({ app: app as never, client: () => client(), onChange: () => {} });
    await lc.refresh(note);
    const broken = lc.state.items.find((i) => i.kind === "broken" && i.target.includes("People"));
    assert.ok(broken, JSON.stringify(lc.state.items));
    const plan = await lc.propose(broken);
    assert.ok(!isRefusal(plan), isRefusal(plan) ? plan.problem : "");
    assert.equal(plan.before, "[People's Engine](./People's%20Engine.md)");
    assert.equal(plan.after, "[People's Engine](Factions/The%20People's%20Engine.md)");
    assert.equal(existsSync(join(VAULT, "Factions/The People's Engine.md")), true, "the new target is a file of the vault");
    assert.equal(lc.apply(broken, plan), null);
    const editor = app.workspace.getActiveViewOfType(MarkdownView)!.editor as unknown as StubEditor;
    assert.equal(editor.changes.length, 1);
    const onDisk = readFileSync(join(VAULT, note), "utf-8");
    assert.equal(editor.getValue(), onDisk.replace(plan.before, plan.after));
    editor.undo();
    assert.equal(editor.getValue(), onDisk);
  });

  test("the views, rendered with the stub in chromium from the server's answers", { skip: process.env.CHROMIUM === "" }, async (t) => {
    const said = await recordAndRender(client(), t).catch((e) => {
      throw new Error(`${e}\nthe server said:\n${server.stderr().slice(-3000)}`);
    });
    if (said) t.skip(said);
  });

  test("a wrong or missing token: 401, and the status line says which setting to fix", async () => {
    for (const token of ["not-the-token", ""]) {
      const err = await client(token).health().then(() => null, (e) => e);
      assert.ok(err instanceof ServerError, String(err));
      assert.equal(err.failure, "token");
      assert.equal(err.status, 401);
      assert.match(err.message, /wrong token .*vault2okf serve --token/);
    }
    const streamed = await client("nope").askStream(QUESTION).then(() => null, (e) => e);
    assert.ok(streamed instanceof ServerError && streamed.failure === "token");
    const plugin = new Vault2OkfPlugin(app as never, {} as never);
    plugin.settings = { serverUrl: server.url, token: "nope", bundle: "", relatedCount: 10 };
    const status = await plugin.checkServer();
    assert.equal(status.level, "error");
    assert.match(status.text, /the token in the settings is not the one given to `vault2okf serve --token`/);
  });

  test("a stopped server: every request says it is not running and how to start it", async () => {
    await server.stop();
    const err = await client().health().then(() => null, (e) => e);
    assert.ok(err instanceof ServerError && err.failure === "down", String(err));
    const streamed = await client().askStream(QUESTION).then(() => null, (e) => e);
    assert.ok(streamed instanceof ServerError && streamed.failure === "down", String(streamed));
    const plugin = new Vault2OkfPlugin(app as never, {} as never);
    plugin.settings = { serverUrl: server.url, token: TOKEN, bundle: "", relatedCount: 10 };
    const status = await plugin.checkServer();
    assert.equal(status.level, "error");
    assert.match(status.text, /vault2okf is not running: start it with `vault2okf serve BUNDLE`/);
  });
});

if (why) test(`server tests skipped: ${why}`, { skip: why }, () => {});
