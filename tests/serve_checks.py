"""Helpers for the `vault2okf serve` tests: a bundle of a shared vault, a server run as a subprocess on a free
port (the one the OS picks), and plain urllib requests to it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VAULT = ROOT.parent / "shared" / "vaults" / "children-of-ash"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
SERVING = re.compile(r"serving .* at (http://\S+?)/ ")


def cli(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``vault2okf ARGS`` from this checkout, its output captured."""
    return subprocess.run([sys.executable, "-m", "vault2okf", *args], capture_output=True, text=True, env=ENV,
                          cwd=ROOT, timeout=900, **kwargs)  # fmt: skip


def make_bundle(out: Path, vault: Path = VAULT) -> Path:
    """``vault`` converted to ``out`` and indexed with MiniLM."""
    from retriever.index import index_bundle
    from vault2okf.convert import convert

    convert(vault, out)
    index_bundle(out, embedder_name="minilm", progress=False)
    return out


class Server:
    """A running `vault2okf serve`: its base URL, process and stderr."""

    def __init__(self, url: str, process: subprocess.Popen[str], errlog: Path) -> None:
        self.url, self.process, self.errlog = url, process, errlog

    def request(self, path: str, body: Any = None, *, headers: dict[str, str] | None = None,
                method: str | None = None, raw: bytes | None = None) -> tuple[int, dict[str, str], Any]:  # fmt: skip
        """(status, headers, JSON body or text) of one request."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        sent = {"Content-Type": "application/json", **(headers or {})}
        req = urllib.request.Request(self.url + path, data=data, headers=sent, method=method)
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                status, got, text = r.status, dict(r.headers), r.read().decode()
        except urllib.error.HTTPError as e:
            status, got, text = e.code, dict(e.headers), e.read().decode()
        ctype = {k.lower(): v for k, v in got.items()}.get("content-type", "")
        return status, got, json.loads(text) if "json" in ctype else text

    def get(self, path: str, **kwargs: Any) -> Any:
        status, _, body = self.request(path, **kwargs)
        assert status == 200, (status, body)
        return body

    def post(self, path: str, body: Any, **kwargs: Any) -> Any:
        status, _, got = self.request(path, body, **kwargs)
        assert status == 200, (status, got)
        return got

    def events(self, body: Any, *, headers: dict[str, str] | None = None) -> list[tuple[str, Any]]:
        """The `/ask` stream as (event, data) pairs, in order."""
        req = urllib.request.Request(self.url + "/ask", data=json.dumps(body).encode(), method="POST",
                                     headers={"Accept": "text/event-stream", **(headers or {})})  # fmt: skip
        with urllib.request.urlopen(req, timeout=600) as r:
            return parse_events(r.read().decode())


def parse_events(text: str) -> list[tuple[str, Any]]:
    out = []
    for block in text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in lines:
            out.append((lines["event"], json.loads(lines["data"])))
    return out


@contextmanager
def serving(bundles: list[Path], *args: str, errlog: Path) -> Iterator[Server]:
    """`vault2okf serve BUNDLES --port 0 ARGS` until the block ends (then interrupted, and killed if it lingers)."""
    with errlog.open("w") as err:
        command = [sys.executable, "-m", "vault2okf", "serve", *map(str, bundles), "--port", "0", *args]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, env=ENV, cwd=ROOT, text=True)
    try:
        url = None
        while url is None:
            found = SERVING.search(errlog.read_text())
            if found:
                url = found.group(1)
            elif process.poll() is not None:
                raise AssertionError(f"serve exited {process.returncode}: {errlog.read_text()}")
            else:
                time.sleep(0.2)
        yield Server(url, process, errlog)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def without_timings(value: Any) -> Any:
    """``value`` with every ``timings_ms`` (and ``first_token``) dropped: what differs run to run."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in ("timings_ms",)}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value
