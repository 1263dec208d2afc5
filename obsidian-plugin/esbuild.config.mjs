// The plugin's bundle: src/main.ts -> main.js (CommonJS, as Obsidian loads it), `obsidian` and the editor's
// packages left to Obsidian. `node esbuild.config.mjs` builds once (minified); the tests build their own bundles
// (scripts/test.mjs), with `obsidian` aliased to tests/obsidian-stub.ts.
import { build } from "esbuild";

const EXTERNAL = ["obsidian", "electron", "@codemirror/*", "@lezer/*"];

await build({
  entryPoints: ["src/main.ts"],
  bundle: true,
  format: "cjs",
  platform: "browser",
  target: "es2021",
  external: EXTERNAL,
  outfile: "main.js",
  minify: true,
  sourcemap: false,
  logLevel: "info",
});
