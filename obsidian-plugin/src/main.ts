/** The plugin: views, commands, settings and the status line, over `vault2okf serve` (src/client.ts). */
import { debounce, MarkdownView, Plugin, TFile, type WorkspaceLeaf } from "obsidian";
import { type Fetch, type Http, Vault2OkfClient } from "./client";
import { DEFAULT_SETTINGS, readSettings, type Settings, Vault2OkfSettingTab } from "./settings";
import { newestChange, serverStatus, type Status } from "./status";
import { obsidianHttp, windowFetch } from "./transport";
import { ASK_VIEW, AskView, LINKS_VIEW, LinksView, RELATED_VIEW, RelatedView, type ViewHost } from "./views";
import { vaultFolder } from "./workspace";

export default class Vault2OkfPlugin extends Plugin implements ViewHost {
  settings: Settings = { ...DEFAULT_SETTINGS };
  status: Status | null = null;
  private statusEl: HTMLElement | null = null;
  http: Http = obsidianHttp;
  fetch: Fetch | undefined = windowFetch;

  get relatedCount(): number {
    return this.settings.relatedCount;
  }

  async onload(): Promise<void> {
    this.settings = readSettings(await this.loadData());
    this.statusEl = this.addStatusBarItem();
    this.statusEl.addClass("vault2okf-statusbar");
    this.statusEl.onclick = () => void this.checkServer();
    this.registerView(ASK_VIEW, (leaf) => new AskView(leaf, this));
    this.registerView(RELATED_VIEW, (leaf) => new RelatedView(leaf, this));
    this.registerView(LINKS_VIEW, (leaf) => new LinksView(leaf, this));
    this.addRibbonIcon("message-circle-question", "Ask the vault (vault2okf)", () => void this.openAsk());
    this.addCommand({ id: "ask", name: "Ask the vault", callback: () => void this.openAsk() });
    this.addCommand({ id: "related", name: "Show related notes", callback: () => void this.reveal(RELATED_VIEW) });
    this.addCommand({ id: "link-health", name: "Show link health", callback: () => void this.reveal(LINKS_VIEW) });
    this.addCommand({ id: "check-server", name: "Check the vault2okf server", callback: () => void this.checkServer() });
    this.addSettingTab(new Vault2OkfSettingTab(this.app, this));
    const follow = debounce(() => this.activeChanged(), 300, true);
    this.registerEvent(this.app.workspace.on("file-open", follow));
    this.registerEvent(this.app.workspace.on("active-leaf-change", follow));
    this.registerEvent(this.app.vault.on("modify", debounce(() => void this.checkServer(), 5000, true)));
    this.registerInterval(window.setInterval(() => void this.checkServer(), 60_000));
    this.app.workspace.onLayoutReady(() => void this.checkServer());
  }

  async saveSettings(): Promise<void> {
    await this.saveData(this.settings);
  }

  client(): Vault2OkfClient {
    return new Vault2OkfClient({
      url: this.settings.serverUrl,
      token: this.settings.token,
      bundle: this.settings.bundle || this.status?.bundle?.name,
      http: this.http,
      fetch: this.fetch,
    });
  }

  /** Asks /health and sets the status line: not running, wrong token, no such bundle, stale, or fine. */
  async checkServer(): Promise<Status> {
    const files = this.app.vault.getMarkdownFiles().map((f) => ({ path: f.path, mtime: f.stat.mtime }));
    const base = { wanted: this.settings.bundle, vaultPath: vaultFolder(this.app), newest: newestChange(files) };
    const client = new Vault2OkfClient({ url: this.settings.serverUrl, token: this.settings.token, http: this.http });
    try {
      this.status = serverStatus({ ...base, health: await client.health() });
    } catch (error) {
      this.status = serverStatus({ ...base, error });
    }
    if (this.statusEl) {
      this.statusEl.setText(this.status.level === "ok" ? "vault2okf ✓" : `vault2okf: ${this.status.level === "warn" ? "⚠" : "✗"}`);
      this.statusEl.setAttr("aria-label", this.status.text);
      this.statusEl.title = this.status.text;
    }
    for (const type of [ASK_VIEW, RELATED_VIEW, LINKS_VIEW]) {
      for (const leaf of this.app.workspace.getLeavesOfType(type)) (leaf.view as AskView | RelatedView | LinksView).render();
    }
    return this.status;
  }

  activePath(): string | null {
    const file = this.app.workspace.getActiveFile();
    return file instanceof TFile && file.extension === "md" ? file.path : null;
  }

  private activeChanged(): void {
    if (!this.app.workspace.getActiveViewOfType(MarkdownView)) return; // a side pane took focus: keep the note
    const path = this.activePath();
    for (const leaf of this.app.workspace.getLeavesOfType(RELATED_VIEW)) (leaf.view as RelatedView).controller.noteChanged(path);
    for (const leaf of this.app.workspace.getLeavesOfType(LINKS_VIEW)) {
      const view = leaf.view as LinksView;
      if (view.controller.state.scope === "note" && view.controller.state.path !== path) void view.controller.refresh(path);
    }
  }

  private async openAsk(): Promise<void> {
    const leaf = await this.reveal(ASK_VIEW);
    (leaf?.view as AskView | undefined)?.focus();
  }

  private async reveal(type: string): Promise<WorkspaceLeaf | null> {
    let leaf: WorkspaceLeaf | null = this.app.workspace.getLeavesOfType(type)[0] ?? null;
    if (!leaf) {
      leaf = this.app.workspace.getRightLeaf(false);
      if (!leaf) return null;
      await leaf.setViewState({ type, active: true });
    }
    await this.app.workspace.revealLeaf(leaf);
    return leaf;
  }
}
