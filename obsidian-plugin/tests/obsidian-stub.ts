/**
 * A stand-in for the `obsidian` module, for the tests and the screenshots only (Obsidian itself cannot run here).
 * The builds of the tests alias `obsidian` to this file; the plugin's own build never sees it. It keeps what the
 * plugin does to Obsidian (links opened, edits made, notices shown) so the tests can check it, and, in a browser,
 * gives elements Obsidian's DOM helpers (createEl, createDiv, empty, setText, ...) so the views render.
 */

// ---- the DOM helpers Obsidian adds to Node / HTMLElement --------------------------------------------------------

interface ElInfo {
  cls?: string | string[];
  text?: string;
  attr?: Record<string, string | number | boolean | null>;
  title?: string;
  value?: string;
  type?: string;
  placeholder?: string;
  href?: string;
}

function makeEl(tag: string, info?: ElInfo | string, callback?: (el: HTMLElement) => void): HTMLElement {
  const el = document.createElement(tag);
  const o: ElInfo = typeof info === "string" ? { cls: info } : (info ?? {});
  if (o.cls) el.className = Array.isArray(o.cls) ? o.cls.join(" ") : o.cls;
  if (o.text !== undefined) el.textContent = o.text;
  for (const [k, v] of Object.entries(o.attr ?? {})) if (v !== null && v !== false) el.setAttribute(k, String(v));
  for (const k of ["title", "value", "type", "placeholder", "href"] as const) if (o[k] !== undefined) el.setAttribute(k, o[k]!);
  if (o.value !== undefined) (el as HTMLInputElement).value = o.value;
  callback?.(el);
  return el;
}

export function installDomHelpers(): void {
  if (typeof Node === "undefined" || "createEl" in Node.prototype) return;
  const proto = Node.prototype as unknown as Record<string, unknown>;
  proto.createEl = function (this: Node, tag: string, info?: ElInfo | string, cb?: (el: HTMLElement) => void) {
    return this.appendChild(makeEl(tag, info, cb));
  };
  proto.createDiv = function (this: Node, info?: ElInfo | string, cb?: (el: HTMLElement) => void) {
    return this.appendChild(makeEl("div", info, cb));
  };
  proto.createSpan = function (this: Node, info?: ElInfo | string, cb?: (el: HTMLElement) => void) {
    return this.appendChild(makeEl("span", info, cb));
  };
  proto.empty = function (this: Node) {
    while (this.firstChild) this.removeChild(this.firstChild);
  };
  proto.setText = function (this: Node, text: string) {
    this.textContent = text;
  };
  const el = HTMLElement.prototype as unknown as Record<string, unknown>;
  el.addClass = function (this: HTMLElement, ...cls: string[]) {
    this.classList.add(...cls);
  };
  el.removeClass = function (this: HTMLElement, ...cls: string[]) {
    this.classList.remove(...cls);
  };
  el.toggleClass = function (this: HTMLElement, cls: string, on: boolean) {
    this.classList.toggle(cls, on);
  };
  el.setAttr = function (this: HTMLElement, name: string, value: string) {
    this.setAttribute(name, value);
  };
}
installDomHelpers();

function div(cls: string): HTMLElement {
  return makeEl("div", { cls });
}

// ---- files, editor, workspace -----------------------------------------------------------------------------------

export class TAbstractFile {
  constructor(public path: string) {}
  get name(): string {
    return this.path.slice(this.path.lastIndexOf("/") + 1);
  }
}

export class TFile extends TAbstractFile {
  stat: { mtime: number; ctime: number; size: number };
  constructor(path: string, mtime = 0) {
    super(path);
    this.stat = { mtime, ctime: mtime, size: 0 };
  }
  get extension(): string {
    const dot = this.name.lastIndexOf(".");
    return dot < 0 ? "" : this.name.slice(dot + 1);
  }
  get basename(): string {
    const dot = this.name.lastIndexOf(".");
    return dot < 0 ? this.name : this.name.slice(0, dot);
  }
}

export interface Pos {
  line: number;
  ch: number;
}

/** An editor over lines of text: keeps each change (one `replaceRange` = one undo step, as CodeMirror does). */
export class StubEditor {
  lines: string[];
  readonly changes: { text: string; from: Pos; to: Pos; origin?: string }[] = [];
  private readonly undoStack: string[][] = [];
  cursor: Pos = { line: 0, ch: 0 };
  scrolledTo: Pos | null = null;

  constructor(text: string) {
    this.lines = text.split("\n");
  }
  getValue(): string {
    return this.lines.join("\n");
  }
  getLine(n: number): string {
    return this.lines[n] ?? "";
  }
  lineCount(): number {
    return this.lines.length;
  }
  replaceRange(text: string, from: Pos, to: Pos = from, origin?: string): void {
    this.changes.push({ text, from, to, origin });
    this.undoStack.push([...this.lines]);
    const before = this.lines.slice(0, from.line);
    const head = this.lines[from.line].slice(0, from.ch);
    const tail = this.lines[to.line].slice(to.ch);
    this.lines = [...before, ...(head + text + tail).split("\n"), ...this.lines.slice(to.line + 1)];
  }
  undo(): void {
    const last = this.undoStack.pop();
    if (last) this.lines = last;
  }
  setCursor(pos: Pos | number, ch?: number): void {
    this.cursor = typeof pos === "number" ? { line: pos, ch: ch ?? 0 } : pos;
  }
  getCursor(): Pos {
    return this.cursor;
  }
  scrollIntoView(range: { from: Pos; to: Pos }): void {
    this.scrolledTo = range.from;
  }
}

export class Component {
  private readonly cleanups: (() => void)[] = [];
  load(): void {}
  onload(): void {}
  unload(): void {
    this.cleanups.splice(0).forEach((f) => f());
  }
  onunload(): void {}
  register(cb: () => void): void {
    this.cleanups.push(cb);
  }
  registerEvent(_ref: unknown): void {}
  registerInterval(id: number): number {
    this.register(() => clearInterval(id));
    return id;
  }
  registerDomEvent(el: EventTarget, type: string, cb: EventListener): void {
    el.addEventListener(type, cb);
  }
}

export abstract class View extends Component {
  app: App;
  containerEl: HTMLElement;
  constructor(public leaf: WorkspaceLeaf) {
    super();
    this.app = leaf.app;
    this.containerEl = typeof document === "undefined" ? ({} as HTMLElement) : div("workspace-leaf-content");
  }
  abstract getViewType(): string;
  abstract getDisplayText(): string;
  getIcon(): string {
    return "";
  }
  async onOpen(): Promise<void> {}
  async onClose(): Promise<void> {}
}

export abstract class ItemView extends View {
  contentEl: HTMLElement;
  constructor(leaf: WorkspaceLeaf) {
    super(leaf);
    if (typeof document === "undefined") {
      this.contentEl = {} as HTMLElement;
      return;
    }
    const header = this.containerEl.createDiv({ cls: "view-header" });
    header.createDiv({ cls: "view-header-title", text: "" });
    this.contentEl = this.containerEl.createDiv({ cls: "view-content" });
  }
}

export class MarkdownView {
  editor: StubEditor;
  constructor(
    public file: TFile | null,
    text: string,
  ) {
    this.editor = new StubEditor(text);
  }
}

/** The view factories plugins registered, by view type (Obsidian keeps them app-wide). */
const VIEW_TYPES = new Map<string, (leaf: WorkspaceLeaf) => View>();

/** Where a leaf's view is shown in a page: the element `.mod-right-split` when there is one. */
export class WorkspaceLeaf {
  view: View | null = null;
  constructor(public app: App) {}
  async setViewState(state: { type: string; active?: boolean }): Promise<void> {
    const factory = VIEW_TYPES.get(state.type);
    if (!factory) throw new Error(`no view of type ${state.type} registered`);
    this.view = factory(this);
    const side = typeof document === "undefined" ? null : document.querySelector(".mod-right-split");
    side?.appendChild(this.view.containerEl);
    await this.view.onOpen();
  }
}

export interface Opened {
  linktext: string;
  sourcePath: string;
  newLeaf: unknown;
  state?: { eState?: Record<string, unknown> };
}

export class Workspace {
  readonly opened: Opened[] = [];
  active: MarkdownView | null = null;
  private readonly views = new Map<string, MarkdownView>(); // one editor per file, kept across openings
  constructor(private readonly app: App) {}

  /** Records the call; opens the file the link names (its editor becomes the active view), as Obsidian would. */
  async openLinkText(linktext: string, sourcePath: string, newLeaf?: unknown, state?: Opened["state"]): Promise<void> {
    this.opened.push({ linktext, sourcePath, newLeaf, state });
    const file = this.app.metadataCache.getFirstLinkpathDest(linktext.split("#")[0], sourcePath);
    if (!file) return;
    const changed = this.active?.file !== file;
    this.active = this.viewOf(file);
    if (changed) {
      this.trigger("file-open", file);
      this.trigger("active-leaf-change");
    }
  }
  viewOf(file: TFile): MarkdownView {
    let view = this.views.get(file.path);
    if (!view) this.views.set(file.path, (view = new MarkdownView(file, this.app.vault.text(file.path))));
    return view;
  }
  getActiveViewOfType<T>(type: abstract new (...args: never[]) => T): T | null {
    return this.active instanceof (type as unknown as typeof MarkdownView) ? (this.active as unknown as T) : null;
  }
  getActiveFile(): TFile | null {
    return this.active?.file ?? null;
  }
  readonly leaves: WorkspaceLeaf[] = [];
  private readonly handlers = new Map<string, ((...args: unknown[]) => unknown)[]>();
  getLeavesOfType(type: string): WorkspaceLeaf[] {
    return this.leaves.filter((l) => l.view?.getViewType() === type);
  }
  getRightLeaf(): WorkspaceLeaf {
    const leaf = new WorkspaceLeaf(this.app);
    this.leaves.push(leaf);
    return leaf;
  }
  async revealLeaf(): Promise<void> {}
  on(name: string, callback: (...args: unknown[]) => unknown): unknown {
    this.handlers.set(name, [...(this.handlers.get(name) ?? []), callback]);
    return { name, callback };
  }
  /** Calls the handlers of `name`, as Obsidian does on its events. */
  trigger(name: string, ...args: unknown[]): void {
    for (const callback of this.handlers.get(name) ?? []) callback(...args);
  }
  onLayoutReady(cb: () => void): void {
    cb();
  }
}

export class Vault {
  private readonly texts = new Map<string, string>();
  private readonly files = new Map<string, TFile>();
  adapter: { getBasePath: () => string };
  constructor(notes: { path: string; text: string; mtime?: number }[], basePath: string) {
    for (const n of notes) {
      this.files.set(n.path, new TFile(n.path, n.mtime ?? 0));
      this.texts.set(n.path, n.text);
    }
    this.adapter = { getBasePath: () => basePath };
  }
  getMarkdownFiles(): TFile[] {
    return [...this.files.values()].filter((f) => f.extension === "md");
  }
  getAbstractFileByPath(path: string): TFile | null {
    return this.files.get(path) ?? null;
  }
  text(path: string): string {
    return this.texts.get(path) ?? "";
  }
  on(): unknown {
    return {};
  }
}

export class MetadataCache {
  constructor(private readonly vault: Vault) {}
  /** Obsidian's default link format ("shortest path when possible"): the file name when no other note has it. */
  fileToLinktext(file: TFile, _sourcePath: string, omitMdExtension = true): string {
    const same = this.vault.getMarkdownFiles().filter((f) => f.basename.toLowerCase() === file.basename.toLowerCase());
    const name = same.length === 1 ? file.name : file.path;
    return omitMdExtension && name.toLowerCase().endsWith(".md") ? name.slice(0, -3) : name;
  }
  getFirstLinkpathDest(linkpath: string, _sourcePath: string): TFile | null {
    const files = this.vault.getMarkdownFiles();
    const want = linkpath.toLowerCase().replace(/\.md$/, "");
    return (
      files.find((f) => f.path.toLowerCase().replace(/\.md$/, "") === want) ??
      files.find((f) => f.basename.toLowerCase() === want) ??
      null
    );
  }
}

export class App {
  workspace: Workspace;
  vault: Vault;
  metadataCache: MetadataCache;
  constructor(notes: { path: string; text: string; mtime?: number }[] = [], basePath = "/vault") {
    this.vault = new Vault(notes, basePath);
    this.metadataCache = new MetadataCache(this.vault);
    this.workspace = new Workspace(this);
  }
}

// ---- notices, modals, settings, plugin ----------------------------------------------------------------------------

export class Notice {
  static shown: string[] = [];
  constructor(public message: string) {
    Notice.shown.push(message);
  }
  hide(): void {}
}

export class Modal {
  static opened: Modal[] = [];
  containerEl: HTMLElement;
  modalEl: HTMLElement;
  titleEl: HTMLElement;
  contentEl: HTMLElement;
  constructor(public app: App) {
    this.containerEl = div("modal-container");
    this.modalEl = this.containerEl.createDiv({ cls: "modal" });
    this.titleEl = this.modalEl.createDiv({ cls: "modal-title" });
    this.contentEl = this.modalEl.createDiv({ cls: "modal-content" });
  }
  open(): void {
    Modal.opened.push(this);
    document.body.appendChild(this.containerEl);
    this.onOpen();
  }
  close(): void {
    this.onClose();
    this.containerEl.remove();
  }
  onOpen(): void {}
  onClose(): void {}
}

type Debouncer<T extends unknown[]> = ((...args: T) => Debouncer<T>) & { cancel(): Debouncer<T>; run(): void };

export function debounce<T extends unknown[], V>(cb: (...args: T) => V, timeout = 0, resetTimer = false): Debouncer<T> {
  let timer: ReturnType<typeof setTimeout> | null = null;
  let args: T | null = null;
  const fire = () => {
    timer = null;
    if (args) cb(...args);
    args = null;
  };
  const d = ((...a: T) => {
    args = a;
    if (timer && resetTimer) {
      clearTimeout(timer);
      timer = null;
    }
    if (!timer) timer = setTimeout(fire, timeout);
    return d;
  }) as Debouncer<T>;
  d.cancel = () => {
    if (timer) clearTimeout(timer);
    timer = null;
    args = null;
    return d;
  };
  d.run = () => {
    if (timer) clearTimeout(timer);
    fire();
  };
  return d;
}

export interface RequestUrlParam {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  throw?: boolean;
}

let requestHandler: (req: RequestUrlParam) => Promise<{ status: number; text: string }> = async () => {
  throw new Error("no requestUrl handler set in the stub");
};

/** The tests decide what `requestUrl` does (a real HTTP request, or recorded answers). */
export function setRequestUrl(handler: typeof requestHandler): void {
  requestHandler = handler;
}

export async function requestUrl(req: RequestUrlParam): Promise<{ status: number; text: string; json: unknown }> {
  const r = await requestHandler(req);
  if (r.status >= 400 && req.throw !== false) throw new Error(`Request failed, status ${r.status}`);
  return { ...r, get json() { return JSON.parse(r.text); } };
}

export class Plugin extends Component {
  readonly commands: { id: string; name: string; callback: () => void }[] = [];
  readonly viewFactories = new Map<string, (leaf: WorkspaceLeaf) => View>();
  data: unknown = null;
  constructor(
    public app: App,
    public manifest: unknown = {},
  ) {
    super();
  }
  addCommand(c: { id: string; name: string; callback: () => void }): void {
    this.commands.push(c);
  }
  addRibbonIcon(): HTMLElement {
    return typeof document === "undefined" ? ({} as HTMLElement) : div("ribbon");
  }
  addStatusBarItem(): HTMLElement {
    return typeof document === "undefined" ? ({ addClass() {}, setText() {}, setAttr() {} } as unknown as HTMLElement) : div("status-bar-item");
  }
  addSettingTab(_tab: unknown): void {}
  registerView(type: string, factory: (leaf: WorkspaceLeaf) => View): void {
    this.viewFactories.set(type, factory);
    VIEW_TYPES.set(type, factory);
  }
  async loadData(): Promise<unknown> {
    return this.data;
  }
  async saveData(data: unknown): Promise<void> {
    this.data = JSON.parse(JSON.stringify(data));
  }
}

export class PluginSettingTab {
  containerEl: HTMLElement;
  constructor(
    public app: App,
    public plugin: Plugin,
  ) {
    this.containerEl = typeof document === "undefined" ? ({} as HTMLElement) : div("vertical-tab-content");
  }
  display(): void {}
}

class TextComponent {
  inputEl: HTMLInputElement;
  constructor(parent: HTMLElement) {
    this.inputEl = parent.createEl("input", { attr: { type: "text" } }) as HTMLInputElement;
  }
  setPlaceholder(p: string): this {
    this.inputEl.placeholder = p;
    return this;
  }
  setValue(v: string): this {
    this.inputEl.value = v;
    return this;
  }
  onChange(cb: (v: string) => unknown): this {
    this.inputEl.addEventListener("change", () => void cb(this.inputEl.value));
    return this;
  }
}

class SliderComponent {
  sliderEl: HTMLInputElement;
  constructor(parent: HTMLElement) {
    this.sliderEl = parent.createEl("input", { attr: { type: "range" } }) as HTMLInputElement;
  }
  setLimits(min: number, max: number, step: number): this {
    Object.assign(this.sliderEl, { min: String(min), max: String(max), step: String(step) });
    return this;
  }
  setValue(v: number): this {
    this.sliderEl.value = String(v);
    return this;
  }
  setDynamicTooltip(): this {
    return this;
  }
  onChange(cb: (v: number) => unknown): this {
    this.sliderEl.addEventListener("change", () => void cb(Number(this.sliderEl.value)));
    return this;
  }
}

class ButtonComponent {
  buttonEl: HTMLButtonElement;
  constructor(parent: HTMLElement) {
    this.buttonEl = parent.createEl("button") as HTMLButtonElement;
  }
  setButtonText(t: string): this {
    this.buttonEl.textContent = t;
    return this;
  }
  setCta(): this {
    this.buttonEl.classList.add("mod-cta");
    return this;
  }
  onClick(cb: () => unknown): this {
    this.buttonEl.addEventListener("click", () => void cb());
    return this;
  }
}

export class Setting {
  settingEl: HTMLElement;
  private readonly info: HTMLElement;
  private readonly control: HTMLElement;
  constructor(parent: HTMLElement) {
    this.settingEl = parent.createDiv({ cls: "setting-item" });
    this.info = this.settingEl.createDiv({ cls: "setting-item-info" });
    this.control = this.settingEl.createDiv({ cls: "setting-item-control" });
  }
  setName(name: string): this {
    this.info.createDiv({ cls: "setting-item-name", text: name });
    return this;
  }
  setDesc(desc: string): this {
    this.info.createDiv({ cls: "setting-item-description", text: desc });
    return this;
  }
  addText(cb: (t: TextComponent) => unknown): this {
    cb(new TextComponent(this.control));
    return this;
  }
  addSlider(cb: (s: SliderComponent) => unknown): this {
    cb(new SliderComponent(this.control));
    return this;
  }
  addButton(cb: (b: ButtonComponent) => unknown): this {
    cb(new ButtonComponent(this.control));
    return this;
  }
}

export function setIcon(_el: HTMLElement, _icon: string): void {}
export function normalizePath(p: string): string {
  return p.replace(/\\/g, "/").replace(/\/+/g, "/").replace(/^\/|\/$/g, "");
}
export const Platform = { isDesktop: true, isMobile: false };
