/**
 * Server-sent events (the `text/event-stream` format of the HTML standard), parsed from text as it arrives.
 * Pure: chunks of text in, whole events out. A chunk may end anywhere, even between the CR and LF of a line end.
 */

export interface SseEvent {
  event: string; // "message" when the event names no type
  data: string; // the data lines joined with "\n"
  id?: string;
}

export class SseParser {
  private pending = ""; // text after the last complete line
  private type = "";
  private data: string[] = [];
  private id: string | undefined;

  /** The events completed by `chunk` (a blank line ends an event), in order. */
  feed(chunk: string): SseEvent[] {
    const text = this.pending + chunk;
    const events: SseEvent[] = [];
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (c !== "\n" && c !== "\r") continue;
      if (c === "\r" && i === text.length - 1) break; // the LF of a CRLF may come in the next chunk
      this.line(text.slice(start, i), events);
      if (c === "\r" && text[i + 1] === "\n") i++;
      start = i + 1;
    }
    this.pending = text.slice(start);
    return events;
  }

  /** At the end of the stream: an event not ended by a blank line is dropped, as the standard says. */
  end(): SseEvent[] {
    const events = this.pending.endsWith("\r") ? this.feed("\n") : []; // a CR held back ends its line
    this.pending = "";
    this.reset();
    return events;
  }

  private line(line: string, events: SseEvent[]): void {
    if (line === "") {
      if (this.data.length) events.push({ event: this.type || "message", data: this.data.join("\n"), id: this.id });
      this.reset();
      return;
    }
    if (line.startsWith(":")) return; // a comment (keep-alive)
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.type = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id") this.id = value;
  }

  private reset(): void {
    this.type = "";
    this.data = [];
  }
}

/** Decodes a byte stream (a fetch body) and hands each event to `onEvent` as soon as it is complete. */
export async function readEvents(
  stream: ReadableStream<Uint8Array>,
  onEvent: (event: SseEvent) => void,
): Promise<void> {
  const reader = stream.getReader();
  const decoder = new TextDecoder("utf-8");
  const parser = new SseParser();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parser.feed(decoder.decode(value, { stream: true })).forEach(onEvent);
  }
  parser.feed(decoder.decode()).forEach(onEvent);
  parser.end().forEach(onEvent);
}
