// `node esbuild.config.mjs`: builds main.js once (esbuild.options.mjs). The tests build their own bundles
// (scripts/test.mjs), with `obsidian` aliased to tests/obsidian-stub.ts.
import { build } from "esbuild";
import { OPTIONS } from "./esbuild.options.mjs";

await build({ ...OPTIONS, outfile: "main.js" });
