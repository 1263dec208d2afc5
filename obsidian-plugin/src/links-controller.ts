/**
 * The Link health view's behaviour, without its DOM: the items of the active note (or the vault), jumping to a
 * line, and a fix proposed as an edit of one line, applied only when asked, through the editor (one change:
 * Ctrl-Z undoes it). It never writes a file itself.
 */
import { type App, type Editor } from "obsidian";
import type { LinkReport } from "./api";
import type { Vault2OkfClient } from "./client";
import { type Edit, isRefusal, type LinkItem, linkItems, planEdit, type Refusal } from "./links-model";
import { editorOf, linkTo, openAtLine } from "./workspace";

export type LinksScope = "note" | "vault";

export interface LinksState {
  scope: LinksScope;
  path: string | null;
  phase: "idle" | "loading" | "done" | "error";
  items: LinkItem[];
  totals: LinkReport["totals"] | null;
  applied: ReadonlySet<string>; // item ids fixed in the editor since the report was read
  error: string;
}

export interface LinksDeps {
  app: App;
  client: () => Vault2OkfClient;
  onChange: () => void;
}

/** How many items the vault-wide list shows (the rest: `vault2okf links BUNDLE --open`). */
export const VAULT_SHOWN = 300;

export class LinksController {
  state: LinksState = { scope: "note", path: null, phase: "idle", items: [], totals: null, applied: new Set(), error: "" };
  private asked = 0;

  constructor(private readonly deps: LinksDeps) {}

  async refresh(path: string | null, scope: LinksScope = this.state.scope): Promise<void> {
    const asked = ++this.asked;
    if (scope === "note" && path === null) {
      this.set({ scope, path, phase: "idle", items: [], totals: null, error: "" });
      return;
    }
    this.set({ scope, path, phase: "loading", error: "", applied: new Set() });
    try {
      const report = await this.deps.client().links(scope === "note" ? (path ?? undefined) : undefined);
      if (asked !== this.asked) return;
      const items = linkItems(report, scope === "note" ? (path ?? undefined) : undefined);
      this.set({ phase: "done", items: scope === "vault" ? items.slice(0, VAULT_SHOWN) : items, totals: report.totals ?? null });
    } catch (err) {
      if (asked === this.asked) this.set({ phase: "error", items: [], error: err instanceof Error ? err.message : String(err) });
    }
  }

  /** Opens the item's note with the cursor on its line. */
  jump(item: LinkItem): Promise<Editor | null> {
    return openAtLine(this.deps.app, item.source, item.line);
  }

  /** The edit that would fix `item` (pointing it at `choice`), read from the note's editor as it is now. */
  async propose(item: LinkItem, choice?: string): Promise<Edit | Refusal> {
    const editor = editorOf(this.deps.app, item.source) ?? (await this.jump(item));
    if (!editor) return { problem: `could not open ${item.source} in an editor` };
    if (item.line > editor.lineCount()) return { problem: `${item.source} has no line ${item.line} any more: the note changed since the bundle was converted` };
    return planEdit(item, editor.getLine(item.line - 1), (path) => linkTo(this.deps.app, path, item.source), choice);
  }

  /** Applies an edit from `propose` as one editor change, if the line is still what it was. */
  apply(item: LinkItem, edit: Edit): Refusal | null {
    const editor = editorOf(this.deps.app, item.source);
    if (!editor) return { problem: `${item.source} is no longer the active note: open it and apply again` };
    if (editor.getLine(edit.line) !== edit.oldLine) return { problem: `line ${edit.line + 1} changed since the fix was shown: apply again` };
    editor.replaceRange(edit.after, { line: edit.line, ch: edit.from }, { line: edit.line, ch: edit.to }, "vault2okf");
    editor.setCursor({ line: edit.line, ch: edit.from + edit.after.length });
    this.set({ applied: new Set([...this.state.applied, item.id]) });
    return null;
  }

  private set(patch: Partial<LinksState>): void {
    this.state = { ...this.state, ...patch };
    this.deps.onChange();
  }
}

export { isRefusal };
