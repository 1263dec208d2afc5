/** The views' behaviour against the `obsidian` stub: what they open, edit, copy and show; no server (fixtures). */
import assert from "node:assert/strict";
import { beforeEach, test } from "node:test";
import { AskController } from "../src/ask-controller";
import { type Fetch, type Http, type HttpRequest, Vault2OkfClient } from "../src/client";
import { LinksController } from "../src/links-controller";
import { isRefusal } from "../src/links-model";
import { RelatedController } from "../src/related-controller";
import { App, MarkdownView, Notice, StubEditor, TFile } from "./obsidian-stub";
import { ASK, HITS, NOTES, RELATED, REPORT } from "./fixtures";

const S3 = "Sessions/Session 3.md";

/** An http transport answering from routes; every request kept. */
function routes(table: Record<string, (req: HttpRequest) => unknown>, seen: HttpRequest[] = []): Http {
  return async (req) => {
    seen.push(req);
    const path = new URL(req.url).pathname;
    const key = Object.keys(table).find((k) => path === k || path.startsWith(k + "/"));
    if (!key) return { status: 404, text: JSON.stringify({ error: `unknown ${path}` }) };
    return { status: 200, text: JSON.stringify(table[key](req)) };
  };
}

/** A fetch whose body streams the given events, one chunk per event. */
function streaming(events: [string, unknown][]): Fetch {
  return async () => {
    const enc = new TextEncoder();
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        for (const [event, data] of events) c.enqueue(enc.encode(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`));
        c.close();
      },
    });
    return { status: 200, body, text: async () => "" };
  };
}

let app: App;
beforeEach(() => {
  app = new App(NOTES, "/vaults/coa");
  Notice.shown.length = 0;
});

test("ask: sources before the answer, tokens appended as they come, citations open at heading or block", async () => {
  const seen: string[] = [];
  const fetch = streaming([["sources", { hits: HITS }], ["token", { text: "Session 3 › Loot: " }], ["token", { text: "a key [1]" }], ["done", ASK]]);
  const noteReq: HttpRequest[] = [];
  const http = routes({ "/notes": () => ({ note_id: "Places/Far Away", vault_path: "Places/Far Away.md" }) }, noteReq);
  const client = new Vault2OkfClient({ url: "http://127.0.0.1:1", http, fetch });
  const c: AskController = new AskController({
    app: app as never,
    client: () => client,
    onChange: () => seen.push(`${c.state.phase}:${c.state.sources.length}:${c.state.answer}`),
    clipboard: async (t) => void copied.push(t),
  });
  const copied: string[] = [];
  await c.ask("  What did they find?  ");
  assert.deepEqual(seen.slice(0, 4), ["searching:0:", "answering:2:", "answering:2:Session 3 › Loot: ", "answering:2:Session 3 › Loot: a key [1]"]);
  assert.equal(c.state.phase, "done");
  assert.equal(c.state.answer, ASK.answer, "the done event's answer is the one kept");
  assert.equal(noteReq.length, 1, "the one citation not among the sources is looked up");
  assert.equal(new URL(noteReq[0].url).pathname, "/notes/Places%2FFar%20Away");
  assert.deepEqual(c.state.citations.map((l) => l.linktext), ["Sessions/Session 3#^loot-1", "NPCs/Tezha Olai", "Places/Far Away#Gates North"]);
  await c.openCitation(c.state.citations[0]);
  await c.openSource(c.state.sources[1], true);
  assert.deepEqual(app.workspace.opened.map((o) => [o.linktext, o.newLeaf]), [["Sessions/Session 3#^loot-1", false], ["NPCs/Tezha Olai", true]]);
  const md = await c.copy();
  assert.deepEqual(copied, [md]);
  assert.ok(md.includes("[[Sessions/Session 3#^loot-1|Session 3 › Loot]]"));
  assert.equal(Notice.shown.length, 1);
});

test("ask: an error event and a refused connection end in the error phase with the server's words", async () => {
  const c1 = new AskController({
    app: app as never,
    client: () => new Vault2OkfClient({ url: "http://x", http: routes({}), fetch: streaming([["sources", { hits: HITS }], ["error", { error: "over the time limit" }]]) }),
    onChange: () => {},
  });
  await c1.ask("q");
  assert.equal(c1.state.phase, "error");
  assert.match(c1.state.error, /over the time limit/);
  assert.equal(c1.state.sources.length, 2, "the sources that came are kept");
  const refused: Fetch = async () => {
    throw new TypeError("fetch failed");
  };
  const c2 = new AskController({ app: app as never, client: () => new Vault2OkfClient({ url: "http://127.0.0.1:9", http: routes({}), fetch: refused }), onChange: () => {} });
  await c2.ask("q");
  assert.match(c2.state.error, /no vault2okf server answers at http:\/\/127\.0\.0\.1:9 .*vault2okf serve/);
});

test("ask: a second question drops the first one's late answer", async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const slow: Fetch = async (_url, init) => {
    const q = JSON.parse(init.body).question;
    if (q === "first") await gate;
    return streaming([["sources", { hits: q === "first" ? [] : HITS }], ["done", { ...ASK, question: q, answer: q }]])(_url, init);
  };
  const c = new AskController({ app: app as never, client: () => new Vault2OkfClient({ url: "http://x", http: routes({}), fetch: slow }), onChange: () => {} });
  const first = c.ask("first");
  await c.ask("second");
  release();
  await first;
  assert.equal(c.state.answer, "second");
  assert.equal(c.state.question, "second");
});

test("related: follows the active note, debounced (one request, for the last note), and opens a click", async () => {
  const seen: HttpRequest[] = [];
  const http = routes({ "/related": () => RELATED }, seen);
  const c = new RelatedController({ app: app as never, client: () => new Vault2OkfClient({ url: "http://x", http, bundle: "coa" }), onChange: () => {}, k: 7, delayMs: 20 });
  c.noteChanged("NPCs/Tezha Olai.md");
  c.noteChanged("Places/Gate.md");
  c.noteChanged(S3);
  assert.equal(seen.length, 0, "nothing asked before the pause");
  await new Promise((r) => setTimeout(r, 60));
  await c.settled();
  assert.equal(seen.length, 1);
  const url = new URL(seen[0].url);
  assert.equal(url.pathname, "/related/Sessions%2FSession%203.md", "the vault path, which the server resolves");
  assert.equal(url.searchParams.get("k"), "7");
  assert.equal(url.searchParams.get("bundle"), "coa");
  assert.deepEqual(c.state.items.map((i) => i.title), ["Tezha Olai", "Far Away"]);
  await c.open(c.state.items[1]);
  assert.deepEqual(app.workspace.opened.at(-1), { linktext: "Places/Far Away", sourcePath: S3, newLeaf: false, state: undefined });
  c.noteChanged(S3);
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(seen.length, 1, "the same note again asks nothing");
});

test("links: the active note's items; a jump puts the cursor on the item's line", async () => {
  const seen: HttpRequest[] = [];
  const c = new LinksController({ app: app as never, client: () => new Vault2OkfClient({ url: "http://x", http: routes({ "/links": () => REPORT }, seen) }), onChange: () => {} });
  await c.refresh(S3);
  assert.equal(new URL(seen[0].url).searchParams.get("note"), S3);
  assert.equal(c.state.items.length, 6);
  const mention = c.state.items.find((i) => i.kind === "mention")!;
  const editor = (await c.jump(mention)) as unknown as StubEditor;
  assert.ok(editor, "the note opened in an editor");
  assert.deepEqual(app.workspace.opened.at(-1)?.state, { eState: { line: 6 } });
  assert.deepEqual(editor.getCursor(), { line: 6, ch: 0 });
  assert.ok(editor.getLine(editor.getCursor().line).startsWith("Tezha Olai gave us"));
  await c.refresh(null, "vault");
  assert.equal(new URL(seen[1].url).searchParams.has("note"), false);
  assert.equal(c.state.items.length, 7);
});

test("links: apply shows the edit first, then makes it as one editor change that one undo reverts", async () => {
  const c = new LinksController({ app: app as never, client: () => new Vault2OkfClient({ url: "http://x", http: routes({ "/links": () => REPORT }) }), onChange: () => {} });
  await c.refresh(S3);
  const broken = c.state.items.find((i) => i.kind === "broken" && i.line === 5)!;
  const before = NOTES[0].text;
  const plan = await c.propose(broken);
  assert.ok(!isRefusal(plan));
  const editor = app.workspace.getActiveViewOfType(MarkdownView)!.editor as unknown as StubEditor;
  assert.equal(editor.getValue(), before, "proposing changes nothing");
  assert.equal(editor.changes.length, 0);
  assert.equal(c.apply(broken, plan), null);
  assert.equal(editor.changes.length, 1, "one replaceRange: one undo step");
  assert.deepEqual(editor.changes[0], { text: "[[Tezha Olai|the smith]]", from: { line: 4, ch: 7 }, to: { line: 4, ch: 31 }, origin: "vault2okf" });
  assert.equal(editor.getValue(), before.replace("[[Tezah Olai|the smith]]", "[[Tezha Olai|the smith]]"));
  assert.ok(c.state.applied.has(broken.id));
  editor.undo();
  assert.equal(editor.getValue(), before);
  assert.equal(app.vault.text(S3), before, "the plugin never wrote the file");
});

test("links: apply refuses when the line changed after the edit was shown, or the note is no longer active", async () => {
  const c = new LinksController({ app: app as never, client: () => new Vault2OkfClient({ url: "http://x", http: routes({ "/links": () => REPORT }) }), onChange: () => {} });
  await c.refresh(S3);
  const amb = c.state.items.find((i) => i.kind === "ambiguous")!;
  const plan = await c.propose(amb, "Places/North/Gate.md");
  assert.ok(!isRefusal(plan));
  assert.equal(plan.after, "[[Places/North/Gate]]", "the stub's shortest link text: the name is shared, so the path");
  const editor = app.workspace.getActiveViewOfType(MarkdownView)!.editor as unknown as StubEditor;
  editor.replaceRange("Now ", { line: 4, ch: 0 });
  assert.match(c.apply(amb, plan)!.problem, /line 5 changed/);
  app.workspace.active = new MarkdownView(new TFile("NPCs/Tezha Olai.md"), "x");
  assert.match(c.apply(amb, plan)!.problem, /no longer the active note/);
});

test("links: a report line past the note's end is refused, not applied", async () => {
  const report = { ...REPORT, broken: [{ ...REPORT.broken[0], at: [`${S3}:99`] }], ambiguous: [], alias_only: [], missing_blocks: [], mentions: { total: 0, by_note: [] } };
  const c = new LinksController({ app: app as never, client: () => new Vault2OkfClient({ url: "http://x", http: routes({ "/links": () => report }) }), onChange: () => {} });
  await c.refresh(S3);
  const plan = await c.propose(c.state.items[0]);
  assert.ok(isRefusal(plan) && /no line 99/.test(plan.problem));
});

test("ask: Stop ends a streaming answer without an error, keeping what came", async () => {
  let close!: () => void;
  const hanging: Fetch = async (_url, init) => {
    const enc = new TextEncoder();
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(enc.encode(`event: sources\ndata: ${JSON.stringify({ hits: HITS })}\n\nevent: token\ndata: {"text": "Half"}\n\n`));
        close = () => c.error(new DOMException("aborted", "AbortError"));
        init.signal?.addEventListener("abort", () => close());
      },
    });
    return { status: 200, body, text: async () => "" };
  };
  const c = new AskController({ app: app as never, client: () => new Vault2OkfClient({ url: "http://x", http: routes({}), fetch: hanging }), onChange: () => {} });
  const asked = c.ask("q");
  while (c.state.answer !== "Half") await new Promise((r) => setTimeout(r, 5));
  assert.equal(c.state.phase, "answering");
  c.stop();
  await asked;
  assert.equal(c.state.phase, "idle");
  assert.equal(c.state.error, "");
  assert.equal(c.state.answer, "Half");
  assert.equal(c.state.sources.length, 2);
});
