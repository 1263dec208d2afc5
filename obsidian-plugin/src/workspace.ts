/** The few things the plugin asks of Obsidian's workspace: open a note at a place, the editor of a note. */
import { type App, type Editor, MarkdownView, TFile } from "obsidian";
import { stripMd } from "./paths";

/** Opens `linktext` (`Note`, `Note#Heading`, `Note#^block`) as a link from `sourcePath` would. */
export function openLink(app: App, linktext: string, sourcePath = "", newLeaf = false): Promise<void> {
  return app.workspace.openLinkText(linktext, sourcePath, newLeaf);
}

/** Opens the note at `vaultPath` with the cursor at the start of `line` (1-based), scrolled into view. */
export async function openAtLine(app: App, vaultPath: string, line: number): Promise<Editor | null> {
  const zero = Math.max(line - 1, 0);
  await app.workspace.openLinkText(stripMd(vaultPath), "", false, { eState: { line: zero } });
  const editor = editorOf(app, vaultPath);
  if (editor) {
    editor.setCursor({ line: zero, ch: 0 });
    editor.scrollIntoView({ from: { line: zero, ch: 0 }, to: { line: zero, ch: 0 } }, true);
  }
  return editor;
}

/** The editor showing `vaultPath` in the active pane, or null. */
export function editorOf(app: App, vaultPath: string): Editor | null {
  const view = app.workspace.getActiveViewOfType(MarkdownView);
  return view && view.file?.path === vaultPath ? view.editor : null;
}

/** The link text Obsidian writes for the note at `path` from `sourcePath` (its name alone when unique). */
export function linkTo(app: App, path: string, sourcePath: string): string {
  const file = app.vault.getAbstractFileByPath(path);
  return file instanceof TFile ? app.metadataCache.fileToLinktext(file, sourcePath, true) : stripMd(path);
}

/** The vault's folder on disk (desktop), or null. */
export function vaultFolder(app: App): string | null {
  const adapter = app.vault.adapter as { getBasePath?: () => string };
  return typeof adapter.getBasePath === "function" ? adapter.getBasePath() : null;
}
