/** The Ask view's behaviour, without its DOM: asks, keeps sources, answer and citations, opens and copies. */
import { type App, Notice } from "obsidian";
import type { AskResult } from "./api";
import { answerMarkdown, type CitationLink, citationLinks, pathsOf, type SourceItem, sourceItems } from "./ask-model";
import type { Vault2OkfClient } from "./client";
import { openLink } from "./workspace";

export type AskPhase = "idle" | "searching" | "answering" | "done" | "error";

export interface AskState {
  question: string;
  phase: AskPhase;
  sources: SourceItem[];
  answer: string;
  result: AskResult | null;
  citations: CitationLink[];
  error: string;
}

export interface AskDeps {
  app: App;
  client: () => Vault2OkfClient;
  onChange: () => void;
  clipboard?: (text: string) => Promise<void>;
}

export class AskController {
  state: AskState = empty("");
  private abort: AbortController | null = null;

  constructor(private readonly deps: AskDeps) {}

  /** Asks `question`; a question asked before it is answered is dropped. */
  async ask(question: string): Promise<void> {
    const q = question.trim();
    if (!q) return;
    this.abort?.abort();
    const abort = (this.abort = new AbortController());
    this.set({ ...empty(q), phase: "searching" });
    const client = this.deps.client();
    try {
      const result = await client.askStream(q, {
        signal: abort.signal,
        onSources: (hits) => this.current(abort) && this.set({ sources: sourceItems(hits), phase: "answering" }),
        onToken: (text) => this.current(abort) && this.set({ answer: this.state.answer + text }),
      });
      if (!this.current(abort)) return;
      const paths = pathsOf([...(result.retrieved ?? []), ...this.state.sources.map(toHitPath)]);
      let citations = citationLinks(result.citations, paths);
      if (citations.some((c) => c.vaultPath === null)) citations = await this.resolve(client, result, paths);
      if (!this.current(abort)) return;
      this.set({ result, answer: result.answer, citations, phase: "done" });
    } catch (err) {
      if (!this.current(abort) || abort.signal.aborted) return;
      this.set({ phase: "error", error: err instanceof Error ? err.message : String(err) });
    }
  }

  stop(): void {
    this.abort?.abort();
    this.abort = null;
    if (this.state.phase === "searching" || this.state.phase === "answering") this.set({ phase: "idle" });
  }

  openSource(item: SourceItem, newLeaf = false): Promise<void> {
    return openLink(this.deps.app, item.linktext, "", newLeaf);
  }

  async openCitation(link: CitationLink, newLeaf = false): Promise<void> {
    if (link.linktext === null) {
      new Notice(`vault2okf: ${link.label} is not a note of this vault`);
      return;
    }
    await openLink(this.deps.app, link.linktext, "", newLeaf);
  }

  markdown(): string {
    return this.state.result ? answerMarkdown(this.state.result, this.state.citations) : "";
  }

  async copy(): Promise<string> {
    const text = this.markdown();
    if (!text) return "";
    const write = this.deps.clipboard ?? ((t: string) => navigator.clipboard.writeText(t));
    await write(text);
    new Notice("vault2okf: answer copied as markdown, with wikilinks to its sources");
    return text;
  }

  /** Citations of notes that were not among the sources: their vault path from /notes. */
  private async resolve(client: Vault2OkfClient, result: AskResult, paths: Map<string, string>): Promise<CitationLink[]> {
    const missing = [...new Set(result.citations.map((c) => c.note_id).filter((id) => !paths.has(id)))];
    await Promise.all(
      missing.map(async (id) => {
        try {
          paths.set(id, (await client.note(id)).vault_path);
        } catch {
          // left unresolved: the view shows it without a link
        }
      }),
    );
    return citationLinks(result.citations, paths);
  }

  private current(abort: AbortController): boolean {
    return this.abort === abort;
  }

  private set(patch: Partial<AskState>): void {
    this.state = { ...this.state, ...patch };
    this.deps.onChange();
  }
}

function empty(question: string): AskState {
  return { question, phase: "idle", sources: [], answer: "", result: null, citations: [], error: "" };
}

function toHitPath(s: SourceItem): { note_id: string; vault_path: string } {
  return { note_id: s.noteId, vault_path: s.vaultPath };
}
