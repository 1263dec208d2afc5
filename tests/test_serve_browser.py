"""The web page of `vault2okf serve` in real headless Chromium, driven over the DevTools protocol
(``websocket-client``): type a question, see the sources and then the answer, open a citation by keyboard and
land on its heading; screenshots in reports/serve-*.png."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_checks import ROOT, serving

pytestmark = pytest.mark.slow
QUESTION = "What is the Virelian Civil War?"
REPORTS = ROOT / "reports"
LOADED = "document.readyState === 'complete' && document.getElementById('status').textContent.includes('38 notes')"
WATCH_ORDER = """window.__order = []; new MutationObserver(() => {
    const seen = window.__order;
    if (document.querySelector('#sources li') && !seen.includes('sources')) seen.push('sources');
    if (document.getElementById('answer').textContent && !seen.includes('answer')) seen.push('answer');
}).observe(document.body, {subtree: true, childList: true, characterData: true}); true"""
LANDED = """(() => { const t = document.querySelector('#note .target');
    const box = document.getElementById('note').getBoundingClientRect(), r = t.getBoundingClientRect();
    return {text: t.textContent, tag: t.tagName, focused: document.activeElement === t,
            visible: r.top >= box.top - 1 && r.top < box.bottom}; })()"""


class Page:
    """One Chromium tab over the DevTools protocol."""

    def __init__(self, ws_url: str) -> None:
        import websocket

        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return dict(message.get("result", {}))

    def js(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def wait(self, expression: str, what: str, seconds: float = 120) -> Any:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            value = self.js(expression)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"waited {seconds:g} s for {what}: {self.js('document.body.innerText')[:2000]}")

    def key(self, key: str, code: str, keycode: int) -> None:
        for kind in ("keyDown", "keyUp"):
            text = {"text": "\r"} if key == "Enter" and kind == "keyDown" else {}
            self.send("Input.dispatchKeyEvent", type=kind, key=key, code=code, windowsVirtualKeyCode=keycode,
                      nativeVirtualKeyCode=keycode, **text)  # fmt: skip

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"]))


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Page]:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("no chromium on this machine: run scripts/install_chromium.sh (Debian's chromium package)")
    profile = tmp_path / "chrome"
    process = subprocess.Popen([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                "--disable-background-networking", "--disable-extensions", "--hide-scrollbars",
                                "--remote-debugging-port=0", "--window-size=1280,900", f"--user-data-dir={profile}",
                                "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            assert time.monotonic() < deadline and process.poll() is None, "chromium did not start"
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
            tab = next(t for t in json.load(r) if t["type"] == "page")
        page = Page(tab["webSocketDebuggerUrl"])
        yield page
        page.ws.close()
    finally:
        process.kill()
        process.wait()


def test_ask_in_the_page_then_open_a_citation_at_its_heading(coa_bundle: Path, tmp_path: Path, browser: Page) -> None:
    with serving([coa_bundle], "--llm", "extract", errlog=tmp_path / "err.txt") as server:
        expected = server.post("/ask", {"question": QUESTION})
        cited = next(c for c in expected["citations"] if c["heading"] == "Details")
        page = browser
        page.send("Page.enable")
        page.send("Page.navigate", url=server.url + "/")
        page.wait(LOADED, "the page to load /health")
        assert page.js("document.activeElement.id") == "question"  # the question box has the focus
        page.send("Input.insertText", text=QUESTION)  # typed, as a keyboard does
        page.js(WATCH_ORDER)
        page.key("Enter", "Enter", 13)
        page.wait("document.querySelectorAll('#citations li').length > 0", "the citations")
        assert page.js("window.__order") == ["sources", "answer"]
        sources = page.js("[...document.querySelectorAll('#sources li button')].map(b => b.dataset.note)")
        assert sources == [h["note_id"] for h in expected["retrieved"]]
        assert page.js("document.getElementById('answer').textContent") == expected["answer"]
        page.screenshot(REPORTS / "serve-answer.png")

        # the citation, by keyboard: focus it, press Enter
        selector = f"#citations button[data-note={json.dumps(cited['note_id'])}][data-heading='Details']"
        page.js(f"document.querySelector({json.dumps(selector)}).focus(); true")
        page.key("Enter", "Enter", 13)
        page.wait(f"document.body.dataset.openNote === {json.dumps(cited['note_id'])}", "the cited note to open")
        assert page.js("document.body.dataset.openHeading") == "Details"
        landed = page.js(LANDED)
        assert landed["text"] == "Details" and landed["tag"].startswith("H") and landed["focused"]
        assert landed["visible"]
        assert page.js("document.getElementById('note-title').textContent") == cited["title"]
        uri = page.js("document.getElementById('obsidian').getAttribute('href')")
        assert uri == "obsidian://open?vault=children-of-ash&file=Sessions%2FSession%2010"
        page.wait("document.querySelector('#links-body') && document.querySelector('#links-body').textContent",
                  "the note's link health")  # fmt: skip
        page.screenshot(REPORTS / "serve-note.png")
        assert "Traceback" not in server.errlog.read_text()


def test_the_page_needs_nothing_from_outside(coa_bundle: Path, tmp_path: Path) -> None:
    with serving([coa_bundle], "--llm", "extract", errlog=tmp_path / "err.txt") as server:
        html = server.get("/")
        js = server.get("/app.js")
        css = server.get("/app.css")
    assert isinstance(html, str) and 'src="app.js"' in html and 'href="app.css"' in html
    for text in (html, js, css):
        assert "http://" not in text and "https://" not in text and "//cdn" not in text
