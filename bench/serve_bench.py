"""Benchmark `vault2okf serve` (issue 35), each figure beside its floor measured in the same run:

    python bench/serve_bench.py --bundle /tmp/thellade [--extra B2 --extra B3] [--runs 10]
                                [--out reports/bench-serve.txt]

- `vault2okf search BUNDLE Q` through a running server vs in process (`--no-server`) vs `python -c pass`;
- `/search` p50/p95 with 1 client and with 8 concurrent clients, beside `/health`'s (the HTTP round trip);
- `/ask` (`--llm extract`) streamed: time to the `sources` event and to the first `token`, beside `/search`'s p50;
- the server's resident memory with 1 bundle and with 3 (``--extra`` twice), beside a bare interpreter's.

BUNDLE must be indexed with MiniLM (`vault2okf index BUNDLE --embedder minilm`). The load average is printed
before and after each part: other work on a shared machine moves every number.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
CLI = [sys.executable, "-m", "vault2okf"]
QUESTIONS = [
    "Who rules the kingdom and what happened in the war?", "Who founded the kingdom?",
    "What happened in the last session?", "Where is the capital?", "Who are the gods of this world?",
    "What did the party find in the dungeon?", "Which faction controls the port?", "Who betrayed the king?",
]  # fmt: skip
LINES: list[str] = []


def say(line: str = "") -> None:
    print(line, flush=True)
    LINES.append(line)


def load() -> str:
    one, five, _ = os.getloadavg()
    raw = Path("/proc/loadavg").read_text().strip()
    return f"load {one:.2f} (5 min {five:.2f}) on {os.cpu_count()} CPUs; /proc/loadavg: {raw}"


def wall(command: Sequence[str], runs: int) -> float:
    """Median wall seconds of ``runs`` fresh processes (each must succeed)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(list(command), capture_output=True, text=True, env=ENV, cwd=ROOT)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed: {done.stderr[-2000:]}")
    return statistics.median(times)


@contextmanager
def serving(bundles: Sequence[Path], errlog: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    with errlog.open("w") as err:
        process = subprocess.Popen([*CLI, "serve", *map(str, bundles), "--port", "0", "--llm", "extract"],
                                   stdout=subprocess.DEVNULL, stderr=err, env=ENV, cwd=ROOT, text=True)  # fmt: skip
    try:
        while not (found := re.search(r"at (http://\S+?)/ ", errlog.read_text())):
            if process.poll() is not None:
                raise SystemExit(f"serve exited: {errlog.read_text()}")
            time.sleep(0.2)
        yield found.group(1), process
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def request(url: str, path: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def concurrent(clients: int, per_client: int, fn: Callable[[int], float]) -> list[float]:
    samples: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def client(c: int) -> None:
        barrier.wait()
        for i in range(per_client):
            ms = fn(c * per_client + i)
            with lock:
                samples.append(ms)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return samples


def stream_times(url: str, question: str) -> tuple[float, float]:
    """Milliseconds from sending `/ask` (SSE) to its `sources` event and to its first `token` event."""
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    req = urllib.request.Request(url + "/ask", data=json.dumps({"question": question}).encode(), headers=headers)
    start = time.perf_counter()
    sources = token = 0.0
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            line = raw.decode()
            if line.startswith("event: sources"):
                sources = (time.perf_counter() - start) * 1000
            elif line.startswith("event: token") and not token:
                token = (time.perf_counter() - start) * 1000
            elif line.startswith("event: done"):
                break
    return sources, token or sources


def soak(url: str, seconds: float) -> None:
    """32 clients for ``seconds``, each asking its own question again and again: every answer must be the one
    that question gets alone (hits and scores), and none may fail."""
    alone = {q: [(h["note_id"], h["score"]) for h in request(url, "/search", {"question": q})["hits"]]
             for q in QUESTIONS}  # fmt: skip
    counts = {"requests": 0, "failed": 0, "other answer": 0}
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(c: int) -> None:
        q = QUESTIONS[c % len(QUESTIONS)]
        while time.monotonic() < stop:
            try:
                got = [(h["note_id"], h["score"]) for h in request(url, "/search", {"question": q})["hits"]]
                outcome = "requests" if got == alone[q] else "other answer"
            except Exception:  # noqa: BLE001 - counted
                outcome = "failed"
            with lock:
                counts["requests"] += 1
                if outcome != "requests":
                    counts[outcome] += 1

    threads = [threading.Thread(target=client, args=(c,)) for c in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    say(f"## 32-client soak, {seconds:g} s of /search (each client its own question)")
    say(f"  {counts['requests']} requests, {counts['failed']} failed, {counts['other answer']} got another answer "
        f"than the question gets alone (target: 0 and 0)")  # fmt: skip
    say(f"  ({load()})")
    say("")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--extra", type=Path, action="append", default=[], help="More bundles (memory with 3).")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--soak", type=float, default=60.0, help="Seconds of the 32-client soak (0: none).")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-serve.txt")
    args = parser.parse_args(argv)
    logs = Path(os.environ.get("TMPDIR", "/tmp"))
    q = QUESTIONS[0]
    say(f"# vault2okf serve on {args.bundle.name} (MiniLM, --llm extract); medians of {args.runs} runs")
    say(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {load()}")
    say("")
    with serving([args.bundle], logs / "serve-bench-1.log") as (url, process):
        request(url, "/search", {"question": q})  # warm
        say("## vault2okf search BUNDLE Q, whole command, wall")
        floor = wall([sys.executable, "-c", "pass"], args.runs)
        through = wall([*CLI, "search", str(args.bundle), q], args.runs)
        alone = wall([*CLI, "search", str(args.bundle), q, "--no-server"], max(3, args.runs // 2))
        say(f"  through the server   {through:6.3f} s   (target <= 0.3 s)")
        say(f"  in process           {alone:6.3f} s   ({alone / through:.1f}x the through-server time)")
        say(f"  floor: python -c pass {floor:5.3f} s")
        say(f"  ({load()})")
        say("")
        say("## /search latency, ms (new connection per request)")
        health = [timed(lambda: request(url, "/health")) for _ in range(args.requests // 2)]
        one = [timed(lambda i=i: request(url, "/search", {"question": QUESTIONS[i % len(QUESTIONS)]}))
               for i in range(args.requests)]  # fmt: skip

        def search(i: int) -> float:
            return timed(lambda: request(url, "/search", {"question": QUESTIONS[i % len(QUESTIONS)]}))

        eight = concurrent(8, max(1, args.requests // 8 * 2), search)
        (h50, h95), (p50, p95), (c50, c95) = percentiles(health), percentiles(one), percentiles(eight)
        say(f"  1 client    p50 {p50:7.1f}  p95 {p95:7.1f}   (target p50 <= 50)   n={len(one)}")
        say(f"  8 clients   p50 {c50:7.1f}  p95 {c95:7.1f}   (target p95 <= 300)  n={len(eight)}")
        say(f"  floor: /health p50 {h50:.1f} p95 {h95:.1f} (the HTTP round trip and /health's own work)")
        say(f"  ({load()})")
        say("")
        say("## /ask --llm extract, streamed (SSE): ms from the request")
        streams = [stream_times(url, QUESTIONS[i % len(QUESTIONS)]) for i in range(max(10, args.runs * 2))]
        s50 = statistics.median(s for s, _ in streams)
        t50 = statistics.median(t for _, t in streams)
        say(f"  sources event   p50 {s50:7.1f}   (target <= 100)")
        say(f"  first token     p50 {t50:7.1f}")
        say(f"  floor: /search p50 {p50:.1f} (the same retrieval, as JSON)")
        say(f"  ({load()})")
        say("")
        if args.soak:
            soak(url, args.soak)
        say("## resident memory of the server (VmRSS after a few requests)")
        rss1 = rss_mb(process.pid)
    imports = "import retriever.serve.app, onnxruntime, starlette, mcp; print(open('/proc/self/status').read())"
    bare = subprocess.run([sys.executable, "-c", imports], capture_output=True, text=True, env=ENV)
    floor_rss = next((int(x.split()[1]) / 1024 for x in bare.stdout.splitlines() if x.startswith("VmRSS:")), 0.0)
    say(f"  1 bundle   {rss1:7.1f} MB")
    if len(args.extra) >= 2:
        bundles = [args.bundle, *args.extra[:2]]
        with serving(bundles, logs / "serve-bench-3.log") as (url, process):
            for name in [b["name"] for b in request(url, "/health")["bundles"]]:
                for question in QUESTIONS[:3]:
                    request(url, "/search", {"question": question, "bundle": name})
            rss3 = rss_mb(process.pid)
        say(f"  3 bundles  {rss3:7.1f} MB   ({', '.join(b.name for b in bundles)})")
    say(f"  floor: an interpreter with the server's imports {floor_rss:.1f} MB")
    say(f"  ({load()})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(LINES) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
