import assert from "node:assert/strict";
import { test } from "node:test";
import { readEvents, SseParser } from "../src/sse";

const STREAM =
  'event: sources\ndata: {"hits": []}\n\n' +
  ": keep-alive\n\n" +
  'event: token\ndata: {"text": "Hel"}\n\n' +
  'event: token\r\ndata: {"text": "lo\\n"}\r\n\r\n' +
  "data: line one\ndata: line two\n\n" +
  'event: done\rdata: {"answer": "Hello"}\r\r' +
  "event: token\ndata: never ended";

const EXPECTED = [
  { event: "sources", data: '{"hits": []}' },
  { event: "token", data: '{"text": "Hel"}' },
  { event: "token", data: '{"text": "lo\\n"}' },
  { event: "message", data: "line one\nline two" },
  { event: "done", data: '{"answer": "Hello"}' },
];

const plain = (events: { event: string; data: string }[]) => events.map(({ event, data }) => ({ event, data }));

test("whole stream: events in order, comments skipped, CRLF/CR/LF line ends, an unended event dropped", () => {
  const p = new SseParser();
  assert.deepEqual(plain([...p.feed(STREAM), ...p.end()]), EXPECTED);
});

test("the same events whatever the chunking, down to one character at a time", () => {
  for (const size of [1, 2, 3, 5, 7, 16, 64]) {
    const p = new SseParser();
    const events = [];
    for (let i = 0; i < STREAM.length; i += size) events.push(...p.feed(STREAM.slice(i, i + size)));
    events.push(...p.end());
    assert.deepEqual(plain(events), EXPECTED, `chunks of ${size}`);
  }
});

test("a CR at the end of a chunk and LF at the start of the next are one line end, not two", () => {
  const p = new SseParser();
  const events = [...p.feed("data: a\r"), ...p.feed("\ndata: b\r\n\r"), ...p.feed("\n")];
  assert.deepEqual(plain(events), [{ event: "message", data: "a\nb" }]);
});

test("readEvents decodes UTF-8 split across byte chunks", async () => {
  const bytes = new TextEncoder().encode('event: token\ndata: {"text": "Éclat — ✓"}\n\n');
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      for (const b of bytes) c.enqueue(new Uint8Array([b])); // one byte at a time: multi-byte characters split
      c.close();
    },
  });
  const got: string[] = [];
  await readEvents(stream, (e) => got.push(e.data));
  assert.deepEqual(got, ['{"text": "Éclat — ✓"}']);
});
