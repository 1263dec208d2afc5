// The plugin's tests: each tests/*.test.ts bundled by esbuild (with `obsidian` aliased to tests/obsidian-stub.ts,
// the plugin's own build never sees the stub) into build-tests/, then run by node's test runner.
// `node scripts/test.mjs [NAME...]` runs the test files whose names contain one of NAMEs.
import { build } from "esbuild";
import { spawnSync } from "node:child_process";
import { readdirSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const only = process.argv.slice(2);
const tests = readdirSync(join(root, "tests"))
  .filter((f) => f.endsWith(".test.ts"))
  .filter((f) => !only.length || only.some((n) => f.includes(n)));
const out = join(root, "build-tests");
rmSync(out, { recursive: true, force: true });
await build({
  entryPoints: tests.map((f) => join(root, "tests", f)),
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  outdir: out,
  outExtension: { ".js": ".mjs" },
  alias: { obsidian: join(root, "tests", "obsidian-stub.ts") },
  external: ["esbuild"],
  banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
  logLevel: "warning",
});
const files = tests.map((f) => join(out, f.replace(/\.ts$/, ".mjs")));
const run = spawnSync(process.execPath, ["--test", "--test-concurrency=1", ...files], { stdio: "inherit", cwd: root });
process.exit(run.status ?? 1);
