/** The Related view's behaviour, without its DOM: follows the active note (debounced), asks, opens. */
import { type App, debounce } from "obsidian";
import { ServerError, type Vault2OkfClient } from "./client";
import { type RelatedItem, relatedItems } from "./related-model";
import { openLink } from "./workspace";

export interface RelatedState {
  path: string | null; // the note the items are for
  phase: "idle" | "loading" | "done" | "error";
  items: RelatedItem[];
  error: string;
}

export interface RelatedDeps {
  app: App;
  client: () => Vault2OkfClient;
  onChange: () => void;
  k?: number;
  delayMs?: number; // the debounce: switching through notes quickly asks once, for the last
}

export const RELATED_DELAY_MS = 400;

export class RelatedController {
  state: RelatedState = { path: null, phase: "idle", items: [], error: "" };
  private asked = 0; // a newer request wins over an older one that answers late
  private readonly debounced: (path: string | null) => void;
  private readonly pending: Array<() => void> = [];

  constructor(private readonly deps: RelatedDeps) {
    this.debounced = debounce((path: string | null) => void this.refresh(path), deps.delayMs ?? RELATED_DELAY_MS, true);
  }

  /** The active note changed (null: none, or not a markdown note). */
  noteChanged(path: string | null): void {
    if (path === this.state.path && this.state.phase !== "error") return;
    this.debounced(path);
  }

  /** Resolves when the refresh under way (if any) has finished: for the tests and the screenshots. */
  settled(): Promise<void> {
    return this.state.phase === "loading" ? new Promise((resolve) => this.pending.push(resolve)) : Promise.resolve();
  }

  async refresh(path: string | null): Promise<void> {
    const asked = ++this.asked;
    if (path === null || !path.toLowerCase().endsWith(".md")) {
      this.set({ path, phase: "idle", items: [], error: "" });
      return;
    }
    this.set({ path, phase: "loading", error: "" });
    try {
      const related = await this.deps.client().related(path, this.deps.k ?? 10);
      if (asked === this.asked) this.set({ phase: "done", items: relatedItems(related, path) });
    } catch (err) {
      if (asked === this.asked) this.set({ phase: "error", items: [], error: failure(err, path) });
    }
  }

  open(item: RelatedItem, newLeaf = false): Promise<void> {
    return openLink(this.deps.app, item.linktext, this.state.path ?? "", newLeaf);
  }

  private set(patch: Partial<RelatedState>): void {
    this.state = { ...this.state, ...patch };
    if (this.state.phase !== "loading") this.pending.splice(0).forEach((resolve) => resolve());
    this.deps.onChange();
  }
}

function failure(err: unknown, path: string): string {
  if (err instanceof ServerError && err.failure === "not-found") {
    return `${path} is not in the bundle (new or renamed since it was converted?): re-run \`vault2okf convert\` or keep \`vault2okf watch\` running`;
  }
  return err instanceof Error ? err.message : String(err);
}
