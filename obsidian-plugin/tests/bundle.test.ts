/** The plugin as Obsidian loads it: main.js built as the build makes it, required with `obsidian` = the stub. */
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { build } from "esbuild";
import { OPTIONS } from "../esbuild.options.mjs";
import * as obsidian from "./obsidian-stub";
import { PLUGIN } from "./server-harness";

async function load(): Promise<new (app: unknown, manifest: unknown) => obsidian.Plugin & Record<string, any>> {
  const out = await build({ ...OPTIONS, entryPoints: [join(PLUGIN, "src", "main.ts")], write: false, logLevel: "warning" });
  const module = { exports: {} as Record<string, unknown> };
  const require = (name: string) => {
    if (name === "obsidian") return obsidian;
    throw new Error(`main.js asked for ${name}: only obsidian is Obsidian's to give`);
  };
  new Function("module", "exports", "require", out.outputFiles![0].text)(module, module.exports, require);
  return module.exports.default as never;
}

test("main.js: one default Plugin class that registers three views, four commands, and checks the server", async () => {
  (globalThis as Record<string, unknown>).window ??= globalThis;
  obsidian.setRequestUrl(async () => {
    throw new Error("net::ERR_CONNECTION_REFUSED");
  });
  const Plugin = await load();
  const app = new obsidian.App([{ path: "A.md", text: "# A", mtime: 1 }], "/v");
  const plugin = new Plugin(app, { id: "vault2okf" });
  assert.ok(plugin instanceof obsidian.Plugin);
  plugin.data = { token: "t", serverUrl: 5, relatedCount: 400 };
  await plugin.onload();
  assert.deepEqual([...plugin.viewFactories.keys()], ["vault2okf-ask", "vault2okf-related", "vault2okf-links"]);
  assert.deepEqual(plugin.commands.map((c) => c.id), ["ask", "related", "link-health", "check-server"]);
  assert.deepEqual(plugin.settings, { serverUrl: "http://127.0.0.1:8765", token: "t", bundle: "", relatedCount: 50 }, "bad saved values fall back");
  await new Promise((r) => setTimeout(r, 20)); // the check started on layout-ready
  assert.equal(plugin.status?.level, "error");
  assert.match(plugin.status?.text, /vault2okf is not running: start it with `vault2okf serve BUNDLE`/);
  plugin.unload();
});
