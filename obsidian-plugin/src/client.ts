/**
 * The client of `vault2okf serve`'s HTTP API. Pure: the transports are injected, so the plugin passes Obsidian's
 * `requestUrl` (and `fetch` for the streamed answer) and the tests pass Node's.
 */
import type { AskResult, Health, Hit, LinkReport, Note, Related, SearchOptions } from "./api";
import { readEvents } from "./sse";

export interface HttpRequest {
  url: string;
  method: "GET" | "POST";
  headers: Record<string, string>;
  body?: string;
}

export interface HttpResponse {
  status: number;
  text: string;
}

/** One request, one whole response; throws only when no response came (no server, refused connection). */
export type Http = (request: HttpRequest) => Promise<HttpResponse>;

export interface StreamResponse {
  status: number;
  body: ReadableStream<Uint8Array> | null;
  text(): Promise<string>;
}

/** `fetch`, or what stands in for it: a response whose body is read as it arrives. */
export type Fetch = (
  url: string,
  init: { method: string; headers: Record<string, string>; body: string; signal?: AbortSignal },
) => Promise<StreamResponse>;

export type Failure = "down" | "token" | "not-found" | "http" | "protocol";

/** What went wrong, in one line that says what to do; `failure` tells the status line which case it is. */
export class ServerError extends Error {
  constructor(
    readonly failure: Failure,
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = "ServerError";
  }
}

export const START_HINT = "start it with `vault2okf serve BUNDLE` (`--token T` to require a token)";

export interface ClientOptions {
  url: string; // http://127.0.0.1:8765
  token?: string;
  bundle?: string; // "" or undefined: the server's only bundle
  http: Http;
  fetch?: Fetch; // the streamed answer; without it /ask is asked whole
}

export interface AskHandlers {
  onSources?: (hits: Hit[]) => void;
  onToken?: (text: string) => void;
  signal?: AbortSignal;
}

export class Vault2OkfClient {
  readonly url: string;

  constructor(private readonly options: ClientOptions) {
    this.url = options.url.trim().replace(/\/+$/, "");
  }

  get bundle(): string | undefined {
    return this.options.bundle || undefined;
  }

  health(): Promise<Health> {
    return this.get<Health>("/health", {}, false);
  }

  search(question: string, options: SearchOptions = {}): Promise<{ hits: Hit[] }> {
    return this.post("/search", { question, ...this.bundleField(), ...options });
  }

  /** The whole answer in one response (no streaming). */
  ask(question: string, options: SearchOptions = {}): Promise<AskResult> {
    return this.post("/ask", { question, ...this.bundleField(), ...options });
  }

  note(noteId: string): Promise<Note> {
    return this.get(`/notes/${encodeURIComponent(noteId)}`, {});
  }

  /** The notes related to one: `note` is its id or its vault path (the server resolves either). */
  related(note: string, k = 10): Promise<Related> {
    return this.get(`/related/${encodeURIComponent(note)}`, { k: String(k) });
  }

  /** The link-health report, only the entries found in `notePath` (a vault path) when it is given. */
  links(notePath?: string): Promise<LinkReport> {
    return this.get("/links", notePath === undefined ? {} : { note: notePath });
  }

  /** The answer streamed: sources first, then the answer's pieces, then the whole `ask --json` object. */
  async askStream(question: string, handlers: AskHandlers = {}, options: SearchOptions = {}): Promise<AskResult> {
    const body = JSON.stringify({ question, ...this.bundleField(), ...options });
    if (!this.options.fetch) return this.askWhole(question, handlers, options);
    let response: StreamResponse;
    try {
      response = await this.options.fetch(this.url + "/ask", {
        method: "POST",
        headers: { ...this.headers(), "Content-Type": "application/json", Accept: "text/event-stream" },
        body,
        signal: handlers.signal,
      });
    } catch (err) {
      if (handlers.signal?.aborted) throw err;
      throw this.down(err);
    }
    if (response.status !== 200 || !response.body) throw this.failed("/ask", response.status, await response.text());
    let result: AskResult | undefined;
    let error: string | undefined;
    try {
      await readEvents(response.body, (event) => {
        if (result || error) return;
        const data = parse(event.data);
        if (event.event === "sources") handlers.onSources?.((data as { hits: Hit[] }).hits);
        else if (event.event === "token") handlers.onToken?.((data as { text: string }).text);
        else if (event.event === "done") result = data as AskResult;
        else if (event.event === "error") error = String((data as { error?: string }).error ?? event.data);
      });
    } catch (err) {
      if (err instanceof ServerError || handlers.signal?.aborted) throw err;
      const cause = err instanceof Error ? err.message : String(err);
      throw new ServerError("down", `the connection to ${this.url} broke during the answer (${cause})`);
    }
    if (error !== undefined) throw new ServerError("http", `the server stopped the answer: ${error}`);
    if (!result) throw new ServerError("protocol", "the answer's stream ended before its `done` event");
    return result;
  }

  private async askWhole(question: string, handlers: AskHandlers, options: SearchOptions): Promise<AskResult> {
    const result = await this.ask(question, options);
    handlers.onSources?.(result.retrieved ?? []);
    handlers.onToken?.(result.answer);
    return result;
  }

  private bundleField(): { bundle?: string } {
    return this.bundle ? { bundle: this.bundle } : {};
  }

  private headers(): Record<string, string> {
    const token = this.options.token?.trim();
    return token ? { Authorization: `Bearer ${token}` } : {};
  }

  private get<T>(path: string, query: Record<string, string>, withBundle = true): Promise<T> {
    const params = new URLSearchParams(withBundle && this.bundle ? { bundle: this.bundle, ...query } : query);
    const qs = params.toString();
    return this.send<T>({ url: this.url + path + (qs ? "?" + qs : ""), method: "GET", headers: this.headers() });
  }

  private post<T>(path: string, body: unknown): Promise<T> {
    const headers = { ...this.headers(), "Content-Type": "application/json" };
    return this.send<T>({ url: this.url + path, method: "POST", headers, body: JSON.stringify(body) });
  }

  private async send<T>(request: HttpRequest): Promise<T> {
    let response: HttpResponse;
    try {
      response = await this.options.http(request);
    } catch (err) {
      throw this.down(err);
    }
    const path = new URL(request.url).pathname;
    if (response.status !== 200) throw this.failed(path, response.status, response.text);
    try {
      return JSON.parse(response.text) as T;
    } catch {
      throw new ServerError("protocol", `${path} answered with something that is not JSON: is ${this.url} vault2okf?`);
    }
  }

  private down(err: unknown): ServerError {
    const cause = err instanceof Error ? err.message : String(err);
    return new ServerError("down", `no vault2okf server answers at ${this.url} (${cause}): ${START_HINT}`);
  }

  private failed(path: string, status: number, text: string): ServerError {
    const said = errorText(text);
    if (status === 401) {
      const fix = this.options.token ? "the token in the settings is not the one given to" : "set the token given to";
      return new ServerError("token", `wrong token (${said}): ${fix} \`vault2okf serve --token\``, status);
    }
    const failure: Failure = status === 404 ? "not-found" : "http";
    return new ServerError(failure, `${path}: ${status} ${said}`, status);
  }
}

function parse(data: string): unknown {
  try {
    return JSON.parse(data);
  } catch {
    throw new ServerError("protocol", `an event of the answer's stream is not JSON: ${data.slice(0, 80)}`);
  }
}

/** The `error` of a `{"error": ...}` body, else the body's start. */
function errorText(text: string): string {
  try {
    const body = JSON.parse(text) as { error?: unknown };
    if (body && typeof body.error === "string") return body.error;
  } catch {
    // not JSON: say what came
  }
  return text.trim().slice(0, 120) || "(empty response)";
}
