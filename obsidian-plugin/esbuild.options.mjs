// The plugin's bundle options: src/main.ts -> main.js, CommonJS as Obsidian loads it, with `obsidian` and the
// editor's packages left to Obsidian. Shared by the build (esbuild.config.mjs) and tests/bundle.test.ts.
export const OPTIONS = {
  entryPoints: ["src/main.ts"],
  bundle: true,
  format: "cjs",
  platform: "browser",
  target: "es2021",
  external: ["obsidian", "electron", "@codemirror/*", "@lezer/*"],
  minify: true,
  sourcemap: false,
  logLevel: "info",
};
