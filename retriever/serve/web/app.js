// The vault2okf web page: ask, see the sources as soon as retrieval ends, the answer streamed in, and each
// citation opened in the page at its heading or block anchor. Plain JS, no external assets.
"use strict";
const $ = (id) => document.getElementById(id);
const state = { token: sessionStorage.getItem("vault2okf-token") || "", bundles: [], note: null };

function headers(extra) {
  const h = Object.assign({ "Content-Type": "application/json" }, extra || {});
  if (state.token) h.Authorization = "Bearer " + state.token;
  return h;
}

async function getJSON(path) {
  const r = await fetch(path, { headers: headers() });
  const data = await r.json().catch(() => ({ error: "the server sent no JSON (" + r.status + ")" }));
  if (r.status === 401) $("token-box").hidden = false;
  if (!r.ok) throw new Error(data.error || String(r.status));
  return data;
}

function say(text, error) {
  $("status").textContent = text;
  $("status").className = error ? "error" : "";
}

function bundle() { return $("bundle").value || undefined; }

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick") node.addEventListener("click", v); else if (v !== undefined && v !== null) node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

function noteButton(label, noteId, heading) {
  return el("button", { class: "cite", type: "button", "data-note": noteId, "data-heading": heading || "",
    onclick: () => openNote(noteId, heading) }, label);
}

function showSources(hits) {
  const list = $("sources");
  list.replaceChildren();
  for (const h of hits) {
    const how = h.via === "hop" && h.seed ? "hop from " + h.seed : h.via;
    list.append(el("li", {}, noteButton(h.title + (h.heading ? " › " + h.heading : ""), h.note_id, h.heading),
      " ", el("span", { class: "meta" }, "(" + how + ", " + h.score.toFixed(3) + ")"),
      el("span", { class: "snippet" }, h.snippet)));
  }
  say(hits.length + " notes found; answering…");
}

function showCitations(result) {
  const list = $("citations");
  list.replaceChildren();
  if (result.not_found) { say("Not found in the vault."); return; }
  result.citations.forEach((c) => {
    list.append(el("li", {}, noteButton(c.title + (c.heading ? " › " + c.heading : ""), c.note_id, c.heading)));
  });
  const flag = result.flag ? " (unsupported: " + result.flag + ")" : "";
  say("Done: " + result.citations.length + " citations" + flag + ".");
}

async function ask(question) {
  $("answer").textContent = "";
  $("citations").replaceChildren();
  $("sources").replaceChildren();
  say("Searching…");
  const r = await fetch("ask", { method: "POST", headers: headers({ Accept: "text/event-stream" }),
    body: JSON.stringify({ question, bundle: bundle() }) });
  if (!r.ok) {
    const data = await r.json().catch(() => ({}));
    if (r.status === 401) $("token-box").hidden = false;
    throw new Error(data.error || String(r.status));
  }
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      handle(event, JSON.parse(data || "null"));
    }
  }
}

function handle(event, data) {
  if (event === "sources") showSources(data.hits);
  else if (event === "token") $("answer").append(data.text);
  else if (event === "done") {
    $("answer").textContent = data.answer;
    showCitations(data);
  } else if (event === "error") say(data.error, true);
}

function slug(text) {
  return text.toLowerCase().replace(/[^\p{L}\p{N}_\s-]/gu, "").trim().replace(/\s+/g, "-");
}

function findAnchor(heading) {
  if (!heading) return null;
  const note = $("note");
  const block = heading.startsWith("^") ? heading.slice(1) : null;
  if (block) return note.querySelector("#" + CSS.escape(block.toLowerCase()));
  const wanted = heading.trim().toLowerCase();
  for (const h of note.querySelectorAll("[data-heading]")) {
    if (h.dataset.heading.toLowerCase() === wanted) return h;
  }
  return note.querySelector("#" + CSS.escape(slug(heading)));
}

async function openNote(noteId, heading) {
  const b = bundle();
  const q = b ? "?bundle=" + encodeURIComponent(b) : "";
  let note;
  try {
    note = await getJSON("notes/" + noteId.split("/").map(encodeURIComponent).join("/") + q);
  } catch (e) { say(e.message, true); return; }
  state.note = note;
  $("note-bar").hidden = false;
  $("note-title").textContent = note.title;
  const link = $("obsidian");
  if (note.obsidian_uri) { link.href = note.obsidian_uri; link.hidden = false; } else link.hidden = true;
  $("note").innerHTML = note.html;
  for (const a of $("note").querySelectorAll("a[href]")) {
    const href = a.getAttribute("href");
    if (/^[a-z][a-z0-9+.-]*:/i.test(href)) continue;  // an outside link: left as it is
    a.addEventListener("click", (ev) => { ev.preventDefault(); followLink(note.doc_path, href); });
  }
  const target = findAnchor(heading);
  $("note").querySelectorAll(".target").forEach((n) => n.classList.remove("target"));
  if (target) {
    target.classList.add("target");
    target.setAttribute("tabindex", "-1");
    const box = $("note");  // the note pane scrolls, not the page: the question and answer stay in view
    box.scrollTop += target.getBoundingClientRect().top - box.getBoundingClientRect().top - 8;
    target.focus({ preventScroll: true });
  } else {
    $("note").scrollTop = 0;
    $("note-title").focus();
  }
  document.body.dataset.openNote = note.note_id;
  document.body.dataset.openHeading = target ? (target.dataset.heading || target.id) : "";
  loadLinks(note.vault_path);
}

function followLink(docPath, href) {
  const [path, anchor] = href.split("#");
  const base = docPath.split("/").slice(0, -1);
  for (const part of decodeURIComponent(path).split("/")) {
    if (part === "..") base.pop(); else if (part && part !== ".") base.push(part);
  }
  const target = base.join("/").replace(/^concepts\//, "").replace(/\.md$/, "");
  openNote(target || state.note.note_id, anchor ? decodeURIComponent(anchor).replace(/-/g, " ") : "");
}

async function loadLinks(vaultPath) {
  const b = bundle();
  const params = new URLSearchParams();
  if (b) params.set("bundle", b);
  if (vaultPath) params.set("note", vaultPath);
  const body = $("links-body");
  try {
    const report = await getJSON("links?" + params);
    body.replaceChildren();
    const t = report.totals || {};
    if (!vaultPath) {
      body.append(el("p", {}, (t.notes || 0) + " notes, " + (t.links || 0) + " links, " +
        Math.round(100 * (t.resolved_share || 0)) + "% resolved, " + (t.orphans || 0) + " orphans."));
    }
    const kinds = [["broken", "Broken"], ["ambiguous", "Ambiguous"], ["alias_only", "Alias only"],
      ["missing_attachments", "Missing attachments"], ["missing_blocks", "Missing blocks"]];
    let any = false;
    for (const [key, label] of kinds) {
      const entries = report[key] || [];
      if (!entries.length) continue;
      any = true;
      const list = el("ul", {});
      for (const e of entries.slice(0, 20)) {
        const fix = e.fix ? " → " + e.fix.path : "";
        list.append(el("li", {}, e.target + " ×" + e.count + fix + " (" + (e.at || []).slice(0, 3).join(", ") + ")"));
      }
      body.append(el("h3", {}, label + " (" + entries.length + ")"), list);
    }
    if (vaultPath && !any) body.append(el("p", {}, "Every link of this note resolves."));
  } catch (e) { body.textContent = e.message; }
}

async function start() {
  try {
    const health = await getJSON("health");
    state.bundles = health.bundles;
    $("bundle").replaceChildren(...health.bundles.map((b) => el("option", { value: b.name }, b.name)));
    $("bundle").hidden = health.bundles.length < 2;
    say(health.bundles.map((b) => b.name + ": " + b.notes + " notes, index " + b.index).join("; "));
    loadLinks(null);
    const hash = new URLSearchParams(location.hash.slice(1));
    if (hash.get("bundle")) $("bundle").value = hash.get("bundle");
    if (hash.get("note")) openNote(hash.get("note"), hash.get("heading") || "");
  } catch (e) { say(e.message, true); }
}

$("ask-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const q = $("question").value.trim();
  if (q) ask(q).catch((e) => say(e.message, true));
});
$("token-save").addEventListener("click", () => {
  state.token = $("token").value;
  sessionStorage.setItem("vault2okf-token", state.token);
  $("token-box").hidden = true;
  start();
});
start();
