/** The plugin's transports: Obsidian's `requestUrl` for plain requests, `fetch` for the streamed answer. */
import { requestUrl } from "obsidian";
import type { Fetch, Http } from "./client";

/** `requestUrl` (Obsidian's own request, no CORS), never throwing on an HTTP error status. */
export const obsidianHttp: Http = async (req) => {
  const r = await requestUrl({ url: req.url, method: req.method, headers: req.headers, body: req.body, throw: false });
  return { status: r.status, text: r.text };
};

/** The window's `fetch`, whose body streams (the server answers CORS for Origin app://obsidian.md). */
export const windowFetch: Fetch | undefined = typeof fetch === "function" ? (url, init) => fetch(url, init) : undefined;
