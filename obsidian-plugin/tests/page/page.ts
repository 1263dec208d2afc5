/**
 * One view of the plugin in a page, over the obsidian stub, answering from recorded server answers (real ones:
 * tests/browser.ts records them from `vault2okf serve`). Renders the view in an Obsidian-like layout, then does
 * what a user would (asks, clicks, applies) and writes what happened into #v2o-result for the test to read.
 */
import type { AskResult, Health, Hit, LinkReport, Related } from "../../src/api";
import { type Fetch, Vault2OkfClient } from "../../src/client";
import { serverStatus } from "../../src/status";
import Vault2OkfPlugin from "../../src/main";
import { obsidianHttp } from "../../src/transport";
import { AskView, LinksView, RelatedView, type ViewHost } from "../../src/views";
import { App, Modal, setRequestUrl, WorkspaceLeaf } from "../obsidian-stub";

export interface Recorded {
  view: "ask" | "related" | "links" | "plugin";
  vaultName: string;
  vaultPath: string;
  notes: { path: string; text: string; mtime: number }[]; // texts only for the notes the views open
  health: Health;
  question: string;
  sources: Hit[];
  tokens: string[];
  done: AskResult;
  relatedNote: string;
  related: Related;
  linksNote: string;
  links: LinkReport;
  noteRefs: Record<string, { note_id: string; vault_path: string }>; // /notes answers for the cited notes
}

declare global {
  interface Window {
    V2O: Recorded;
  }
}

const data = window.V2O;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function answer(url: string): unknown {
  const u = new URL(url);
  if (u.pathname === "/health") return data.health;
  if (u.pathname.startsWith("/related/")) return data.related;
  if (u.pathname === "/links") return data.links;
  if (u.pathname.startsWith("/notes/")) {
    const ref = data.noteRefs[decodeURIComponent(u.pathname.slice("/notes/".length))];
    if (ref) return ref;
  }
  throw new Error(`nothing recorded for ${u.pathname}`);
}

const requests: string[] = []; // what the plugin asked, in order
setRequestUrl(async (req) => {
  const u = new URL(req.url);
  requests.push(decodeURIComponent(u.pathname + u.search).replace(/\+/g, " "));
  return { status: 200, text: JSON.stringify(answer(req.url)) };
});

const replay: Fetch = async () => {
  const enc = new TextEncoder();
  const events: [string, unknown][] = [["sources", { hits: data.sources }], ...data.tokens.map((t): [string, unknown] => ["token", { text: t }]), ["done", data.done]];
  const body = new ReadableStream<Uint8Array>({
    async start(c) {
      for (const [event, payload] of events) {
        c.enqueue(enc.encode(`event: ${event}\ndata: ${JSON.stringify(payload)}\n\n`));
        await sleep(5);
      }
      c.close();
    },
  });
  return { status: 200, body, text: async () => "" };
};

async function main(): Promise<unknown> {
  const app = new App(data.notes, data.vaultPath);
  const active = data.view === "links" ? data.linksNote : data.relatedNote;
  await app.workspace.openLinkText(active.replace(/\.md$/, ""), "");
  app.workspace.opened.length = 0;
  const status = serverStatus({ health: data.health, wanted: "", vaultPath: data.vaultPath, newest: null });
  const host: ViewHost = {
    app: app as never,
    client: () => new Vault2OkfClient({ url: "http://127.0.0.1:8765", http: obsidianHttp, fetch: replay, bundle: status.bundle?.name }),
    status,
    relatedCount: 10,
    activePath: () => app.workspace.getActiveFile()?.path ?? null,
  };
  layout(active, data.notes.find((n) => n.path === active)?.text ?? "");
  if (data.view === "plugin") return pluginScenario(app, host);
  const leaf = new WorkspaceLeaf(app as never);
  const side = document.querySelector(".mod-right-split")!;
  if (data.view === "ask") {
    const view = new AskView(leaf as never, host);
    mount(side, view.containerEl, view.getDisplayText());
    await view.onOpen();
    const box = view.contentEl.querySelector("textarea")!;
    box.value = data.question;
    view.contentEl.querySelector("form")!.requestSubmit();
    while (view.controller.state.phase !== "done" && view.controller.state.phase !== "error") await sleep(10);
    const first = view.contentEl.querySelector<HTMLElement>(".vault2okf-citation a");
    first?.click();
    await sleep(10);
    return {
      phase: view.controller.state.phase,
      error: view.controller.state.error,
      sources: [...view.contentEl.querySelectorAll(".vault2okf-source a")].map((a) => a.getAttribute("data-href")),
      citations: [...view.contentEl.querySelectorAll(".vault2okf-citation a")].map((a) => a.getAttribute("data-href")),
      answer: view.contentEl.querySelector(".vault2okf-answer")?.textContent,
      opened: app.workspace.opened.map((o) => o.linktext),
      copy: view.contentEl.querySelector(".vault2okf-copy")?.textContent,
    };
  }
  if (data.view === "related") {
    const view = new RelatedView(leaf as never, host);
    mount(side, view.containerEl, view.getDisplayText());
    await view.onOpen();
    await sleep(500); // the debounce
    await view.controller.settled();
    view.contentEl.querySelector<HTMLElement>(".vault2okf-related-item a")?.click();
    await sleep(10);
    return {
      phase: view.controller.state.phase,
      error: view.controller.state.error,
      heading: view.contentEl.querySelector(".vault2okf-heading")?.textContent,
      items: [...view.contentEl.querySelectorAll(".vault2okf-related-item")].map((li) => ({
        href: li.querySelector("a")?.getAttribute("data-href"),
        why: [...li.querySelectorAll(".vault2okf-reason")].map((s) => s.textContent),
      })),
      opened: app.workspace.opened.map((o) => o.linktext),
    };
  }
  const view = new LinksView(leaf as never, host);
  mount(side, view.containerEl, view.getDisplayText());
  await view.onOpen();
  const items = [...view.contentEl.querySelectorAll(".vault2okf-link-item")].map((li) => ({
    line: li.querySelector(".vault2okf-line")?.textContent,
    kind: li.querySelector(".vault2okf-kind")?.textContent,
    title: li.querySelector(".vault2okf-link-title")?.textContent,
  }));
  const applicable = [...view.contentEl.querySelectorAll(".vault2okf-link-item")].find((li) => li.querySelector(".vault2okf-apply"));
  applicable?.querySelector<HTMLElement>(".vault2okf-line")?.click(); // jump to its line
  await sleep(10);
  applicable?.querySelector<HTMLElement>(".vault2okf-apply")?.click();
  for (let i = 0; i < 100 && !Modal.opened.length; i++) await sleep(10);
  const modal = Modal.opened[0]?.contentEl;
  return {
    phase: view.controller.state.phase,
    error: view.controller.state.error,
    items,
    modal: modal && {
      title: Modal.opened[0].titleEl.textContent,
      old: modal.querySelector(".vault2okf-old")?.textContent,
      new: modal.querySelector(".vault2okf-new")?.textContent,
    },
    opened: app.workspace.opened.map((o) => [o.linktext, o.state?.eState?.line]),
    editorChanges: (app.workspace.active?.editor.changes ?? []).length,
  };
}

/**
 * The plugin itself (src/main.ts) over the stub: loaded, its commands open the Related and Link health panes,
 * then the user goes through three notes quickly: the panes follow the last one, asking once each.
 */
async function pluginScenario(app: App, host: ViewHost): Promise<unknown> {
  const plugin = new Vault2OkfPlugin(app as never, { id: "vault2okf" } as never);
  plugin.fetch = replay;
  await plugin.onload();
  await sleep(50);
  const opened = requests.length;
  const commands = (plugin as unknown as { commands: { id: string; callback: () => void }[] }).commands;
  for (const id of ["related", "link-health"]) commands.find((c) => c.id === id)!.callback();
  await sleep(1000);
  const first = requests.slice(opened);
  const notes = ["NPCs/Tezha Olai", "Factions/The Union", data.linksNote.replace(/\.md$/, "")];
  for (const note of notes) {
    await app.workspace.openLinkText(note, "");
    await sleep(40);
  }
  await sleep(1500);
  const side = document.querySelector(".mod-right-split")!;
  return {
    status: plugin.status,
    statusAtStart: requests.slice(0, opened),
    onOpen: first,
    afterSwitch: requests.slice(opened + first.length),
    active: host.activePath(),
    headings: [...side.querySelectorAll(".vault2okf-heading")].map((h) => h.textContent),
    linkItems: side.querySelectorAll(".vault2okf-link-item").length,
  };
}

/** An Obsidian-like window: the note in the editor, the view in the right sidebar. */
function layout(path: string, text: string): void {
  document.body.innerHTML = `
    <div class="app-container">
      <div class="workspace-main"><div class="note-title"></div><pre class="markdown-source"></pre></div>
      <div class="mod-right-split"></div>
    </div>`;
  document.querySelector(".note-title")!.textContent = path.replace(/\.md$/, "");
  document.querySelector(".markdown-source")!.textContent = text
    .split("\n")
    .map((l, i) => `${String(i + 1).padStart(3)}  ${l}`)
    .join("\n");
}

function mount(side: Element, container: HTMLElement, title: string): void {
  side.appendChild(container);
  container.querySelector(".view-header-title")!.textContent = title;
}

main().then(
  (result) => write({ ok: true, result }),
  (err: unknown) => write({ ok: false, error: String(err instanceof Error ? err.stack : err) }),
);

function write(value: unknown): void {
  const out = document.createElement("script");
  out.type = "application/json";
  out.id = "v2o-result";
  out.textContent = JSON.stringify(value).replace(/</g, "\\u003c");
  document.body.appendChild(out);
}
