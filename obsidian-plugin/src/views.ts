/** The three side-pane views: thin DOM over the controllers (src/*-controller.ts), which hold the behaviour. */
import { type App, ItemView, Modal, type WorkspaceLeaf } from "obsidian";
import { AskController } from "./ask-controller";
import type { Vault2OkfClient } from "./client";
import { type Edit, isRefusal, KIND_NAMES, type LinkItem } from "./links-model";
import { LinksController, type LinksScope } from "./links-controller";
import { stripMd } from "./paths";
import { RelatedController } from "./related-controller";
import type { Status } from "./status";

export const ASK_VIEW = "vault2okf-ask";
export const RELATED_VIEW = "vault2okf-related";
export const LINKS_VIEW = "vault2okf-links";

/** What the views need of the plugin. */
export interface ViewHost {
  app: App;
  client(): Vault2OkfClient;
  status: Status | null;
  relatedCount: number;
  activePath(): string | null;
}

abstract class Vault2OkfView extends ItemView {
  constructor(
    leaf: WorkspaceLeaf,
    protected readonly host: ViewHost,
  ) {
    super(leaf);
  }

  async onOpen(): Promise<void> {
    this.contentEl.addClass("vault2okf-view");
    this.render();
  }

  abstract render(): void;

  /** The server's status line, when it is not fine. */
  protected statusLine(parent: HTMLElement): void {
    const status = this.host.status;
    if (status && status.level !== "ok") parent.createDiv({ cls: `vault2okf-status is-${status.level}`, text: status.text });
  }
}

export class AskView extends Vault2OkfView {
  readonly controller: AskController;
  private input: HTMLTextAreaElement | null = null;

  constructor(leaf: WorkspaceLeaf, host: ViewHost) {
    super(leaf, host);
    this.controller = new AskController({ app: host.app, client: () => host.client(), onChange: () => this.renderResult() });
  }

  getViewType(): string {
    return ASK_VIEW;
  }
  getDisplayText(): string {
    return "Ask the vault";
  }
  getIcon(): string {
    return "message-circle-question";
  }

  focus(): void {
    this.input?.focus();
  }

  render(): void {
    const el = this.contentEl;
    el.empty();
    const form = el.createEl("form", { cls: "vault2okf-ask-form" });
    this.input = form.createEl("textarea", { cls: "vault2okf-question", attr: { rows: 3, placeholder: "Ask your notes…" } });
    this.input.value = this.controller.state.question;
    const buttons = form.createDiv({ cls: "vault2okf-buttons" });
    buttons.createEl("button", { text: "Ask", cls: "mod-cta", attr: { type: "submit" } });
    buttons.createEl("button", { text: "Stop", cls: "vault2okf-stop", attr: { type: "button" } }).onclick = () => this.controller.stop();
    this.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) {
        e.preventDefault();
        form.requestSubmit();
      }
    });
    form.onsubmit = (e) => {
      e.preventDefault();
      void this.controller.ask(this.input?.value ?? "");
    };
    el.createDiv({ cls: "vault2okf-result" });
    this.renderResult();
  }

  renderResult(): void {
    const box = this.contentEl.querySelector<HTMLElement>(".vault2okf-result");
    if (!box) return;
    box.empty();
    this.statusLine(box);
    const s = this.controller.state;
    if (s.phase === "idle" && !s.question) return;
    if (s.phase === "searching") box.createDiv({ cls: "vault2okf-progress", text: "Searching the notes…" });
    if (s.phase === "answering" || s.answer) {
      box.createEl("h4", { text: "Answer" });
      const answer = box.createDiv({ cls: "vault2okf-answer", text: s.answer || "…" });
      if (s.phase === "answering") answer.addClass("is-streaming");
    }
    if (s.phase === "done" && s.result) this.renderCitations(box);
    if (s.phase === "error") box.createDiv({ cls: "vault2okf-status is-error", text: s.error });
    if (s.sources.length) this.renderSources(box);
  }

  private renderSources(box: HTMLElement): void {
    const s = this.controller.state;
    box.createEl("h4", { text: `Sources (${s.sources.length})` });
    const list = box.createEl("ol", { cls: "vault2okf-sources" });
    for (const item of s.sources) {
      const li = list.createEl("li", { cls: "vault2okf-source", attr: { title: item.snippet } });
      const a = li.createEl("a", { text: item.label, cls: "internal-link", attr: { "data-href": item.linktext, href: item.linktext } });
      a.onclick = (e) => {
        e.preventDefault();
        void this.controller.openSource(item, e.ctrlKey || e.metaKey);
      };
      li.createSpan({ cls: "vault2okf-why", text: ` ${item.why} · ${item.score.toFixed(2)}` });
    }
  }

  private renderCitations(box: HTMLElement): void {
    const s = this.controller.state;
    if (s.result?.not_found) box.createDiv({ cls: "vault2okf-note", text: "The notes do not say." });
    if (s.citations.length) {
      box.createEl("h4", { text: "Citations" });
      const list = box.createEl("ol", { cls: "vault2okf-citations" });
      for (const c of s.citations) {
        const li = list.createEl("li", { cls: "vault2okf-citation" });
        if (c.linktext) {
          const a = li.createEl("a", { text: c.label, cls: "internal-link", attr: { "data-href": c.linktext, href: c.linktext } });
          a.onclick = (e) => {
            e.preventDefault();
            void this.controller.openCitation(c, e.ctrlKey || e.metaKey);
          };
        } else li.createSpan({ text: c.label });
        if (c.quote) li.createEl("blockquote", { cls: "vault2okf-quote", text: c.quote });
      }
    }
    const copy = box.createEl("button", { text: "Copy answer with citations as markdown", cls: "vault2okf-copy" });
    copy.onclick = () => void this.controller.copy();
  }
}

export class RelatedView extends Vault2OkfView {
  readonly controller: RelatedController;

  constructor(leaf: WorkspaceLeaf, host: ViewHost) {
    super(leaf, host);
    this.controller = new RelatedController({ app: host.app, client: () => host.client(), onChange: () => this.render(), k: host.relatedCount });
  }

  getViewType(): string {
    return RELATED_VIEW;
  }
  getDisplayText(): string {
    return "Related notes";
  }
  getIcon(): string {
    return "git-fork";
  }

  async onOpen(): Promise<void> {
    await super.onOpen();
    this.controller.noteChanged(this.host.activePath());
  }

  render(): void {
    const el = this.contentEl;
    el.empty();
    this.statusLine(el);
    const s = this.controller.state;
    el.createDiv({ cls: "vault2okf-heading", text: s.path ? `Related to ${stripMd(s.path)}` : "Open a note to see its related notes" });
    if (s.phase === "loading") el.createDiv({ cls: "vault2okf-progress", text: "Looking…" });
    if (s.phase === "error") el.createDiv({ cls: "vault2okf-status is-error", text: s.error });
    if (s.phase === "done" && !s.items.length) el.createDiv({ cls: "vault2okf-note", text: "Nothing related found." });
    const list = el.createEl("ul", { cls: "vault2okf-related" });
    for (const item of s.items) {
      const li = list.createEl("li", { cls: "vault2okf-related-item" });
      const a = li.createEl("a", { text: item.title, cls: "internal-link", attr: { "data-href": item.linktext, href: item.linktext } });
      a.onclick = (e) => {
        e.preventDefault();
        void this.controller.open(item, e.ctrlKey || e.metaKey);
      };
      const why = li.createDiv({ cls: "vault2okf-reasons" });
      for (const w of item.why) why.createSpan({ cls: `vault2okf-reason is-${w.replace(/\s+/g, "-")}`, text: w });
      if (item.vaultPath !== item.title + ".md") li.createDiv({ cls: "vault2okf-path", text: stripMd(item.vaultPath) });
    }
  }
}

export class LinksView extends Vault2OkfView {
  readonly controller: LinksController;

  constructor(leaf: WorkspaceLeaf, host: ViewHost) {
    super(leaf, host);
    this.controller = new LinksController({ app: host.app, client: () => host.client(), onChange: () => this.render() });
  }

  getViewType(): string {
    return LINKS_VIEW;
  }
  getDisplayText(): string {
    return "Link health";
  }
  getIcon(): string {
    return "link";
  }

  async onOpen(): Promise<void> {
    await super.onOpen();
    await this.controller.refresh(this.host.activePath());
  }

  render(): void {
    const el = this.contentEl;
    el.empty();
    this.statusLine(el);
    const s = this.controller.state;
    const bar = el.createDiv({ cls: "vault2okf-scope" });
    for (const scope of ["note", "vault"] as LinksScope[]) {
      const b = bar.createEl("button", { text: scope === "note" ? "This note" : "Whole vault", cls: s.scope === scope ? "is-active" : "" });
      b.onclick = () => void this.controller.refresh(this.host.activePath(), scope);
    }
    bar.createEl("button", { text: "Refresh", cls: "vault2okf-refresh" }).onclick = () => void this.controller.refresh(this.host.activePath());
    if (s.totals && s.scope === "vault") {
      el.createDiv({ cls: "vault2okf-note", text: `${s.totals.notes} notes, ${s.totals.links} links, ${(s.totals.resolved_share * 100).toFixed(1)}% resolve` });
    }
    if (s.scope === "note") el.createDiv({ cls: "vault2okf-heading", text: s.path ? stripMd(s.path) : "Open a note to check its links" });
    if (s.phase === "loading") el.createDiv({ cls: "vault2okf-progress", text: "Reading the link-health report…" });
    if (s.phase === "error") el.createDiv({ cls: "vault2okf-status is-error", text: s.error });
    if (s.phase === "done" && !s.items.length) el.createDiv({ cls: "vault2okf-note", text: "No broken or ambiguous links, no unlinked mentions." });
    const list = el.createEl("ul", { cls: "vault2okf-links" });
    for (const item of s.items) this.renderItem(list, item);
  }

  private renderItem(list: HTMLElement, item: LinkItem): void {
    const applied = this.controller.state.applied.has(item.id);
    const li = list.createEl("li", { cls: `vault2okf-link-item is-${item.kind}${applied ? " is-applied" : ""}` });
    const head = li.createDiv({ cls: "vault2okf-link-head" });
    const where = this.controller.state.scope === "vault" ? `${stripMd(item.source)}:${item.line}` : `line ${item.line}`;
    const jump = head.createEl("a", { text: where, cls: "vault2okf-line", attr: { href: "#" } });
    jump.onclick = (e) => {
      e.preventDefault();
      void this.controller.jump(item);
    };
    head.createSpan({ cls: "vault2okf-kind", text: KIND_NAMES[item.kind] });
    li.createDiv({ cls: "vault2okf-link-title", text: item.headline });
    li.createDiv({ cls: "vault2okf-why", text: item.why });
    if (!item.choices.length || applied) {
      if (applied) li.createDiv({ cls: "vault2okf-note", text: "Applied (Ctrl-Z in the note undoes it)" });
      return;
    }
    const row = li.createDiv({ cls: "vault2okf-apply-row" });
    let choice = item.choices[0].path;
    if (item.choices.length > 1) {
      const select = row.createEl("select", { cls: "dropdown" });
      for (const c of item.choices) select.createEl("option", { text: stripMd(c.path), value: c.path, title: c.why });
      select.onchange = () => (choice = select.value);
    }
    row.createEl("button", { text: "Apply…", cls: "vault2okf-apply" }).onclick = async () => {
      const plan = await this.controller.propose(item, choice);
      if (isRefusal(plan)) {
        li.createDiv({ cls: "vault2okf-status is-error", text: plan.problem });
        return;
      }
      new ConfirmEdit(this.app, item, plan, () => {
        const refused = this.controller.apply(item, plan);
        if (refused) li.createDiv({ cls: "vault2okf-status is-error", text: refused.problem });
      }).open();
    };
  }
}

/** Shows the line before and after the fix; applies only on "Apply". */
export class ConfirmEdit extends Modal {
  constructor(
    app: App,
    private readonly item: LinkItem,
    private readonly edit: Edit,
    private readonly onApply: () => void,
  ) {
    super(app);
  }

  onOpen(): void {
    const { contentEl, titleEl } = this;
    titleEl.setText(`Fix the ${KIND_NAMES[this.item.kind]} on line ${this.item.line}`);
    contentEl.addClass("vault2okf-confirm");
    contentEl.createDiv({ cls: "vault2okf-path", text: this.item.source });
    const diff = contentEl.createDiv({ cls: "vault2okf-diff" });
    lineWithMark(diff.createDiv({ cls: "vault2okf-old" }), "−", this.edit.oldLine, this.edit.from, this.edit.from + this.edit.before.length);
    lineWithMark(diff.createDiv({ cls: "vault2okf-new" }), "+", this.edit.newLine, this.edit.from, this.edit.from + this.edit.after.length);
    contentEl.createDiv({ cls: "vault2okf-why", text: this.item.why });
    const buttons = contentEl.createDiv({ cls: "modal-button-container" });
    buttons.createEl("button", { text: "Apply", cls: "mod-cta" }).onclick = () => {
      this.onApply();
      this.close();
    };
    buttons.createEl("button", { text: "Cancel" }).onclick = () => this.close();
  }

  onClose(): void {
    this.contentEl.empty();
  }
}

function lineWithMark(el: HTMLElement, sign: string, text: string, from: number, to: number): void {
  el.createSpan({ cls: "vault2okf-sign", text: sign + " " });
  el.createSpan({ text: text.slice(0, from) });
  el.createEl("mark", { text: text.slice(from, to) });
  el.createSpan({ text: text.slice(to) });
}
