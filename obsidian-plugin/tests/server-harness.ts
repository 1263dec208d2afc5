/**
 * A real `vault2okf serve` for the tests: a shared vault converted and indexed (`index --embedder minilm`) into a
 * temporary bundle, served with `--llm extract` on a port the system picks, stopped by the test.
 * The Python is $VAULT2OKF_PYTHON, else the repository's .venv/bin/python; the repository goes first on PYTHONPATH.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const PLUGIN = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const REPO = resolve(PLUGIN, "..");
export const VAULTS = resolve(REPO, "..", "shared", "vaults");
export const PYTHON = process.env.VAULT2OKF_PYTHON || join(REPO, ".venv", "bin", "python");

const ENV = { ...process.env, PYTHONPATH: REPO, HF_HUB_OFFLINE: "1", TOKENIZERS_PARALLELISM: "false" };

/** Why the server tests cannot run here, or null when they can. */
export function cannotServe(vault: string): string | null {
  if (!existsSync(PYTHON)) return `no Python at ${PYTHON}: set VAULT2OKF_PYTHON or run \`make install\``;
  if (!existsSync(vault)) return `${vault} not present (the shared vaults sit beside the repository)`;
  const help = spawnSync(PYTHON, ["-m", "vault2okf", "serve", "--help"], { env: ENV, encoding: "utf-8" });
  if (help.status !== 0) return `this vault2okf has no \`serve\` command yet (${(help.stderr || help.stdout).trim().split("\n").pop()})`;
  return null;
}

function run(args: string[]): void {
  const done = spawnSync(PYTHON, ["-m", "vault2okf", ...args], { env: ENV, encoding: "utf-8" });
  if (done.status !== 0) throw new Error(`vault2okf ${args.join(" ")} failed (${done.status}):\n${done.stderr}`);
}

/** A converted and indexed bundle of `vault`: $VAULT2OKF_PLUGIN_BUNDLE when it names one (kept), else a new one. */
export function makeBundle(vault: string): { path: string; remove: () => void } {
  const given = process.env.VAULT2OKF_PLUGIN_BUNDLE;
  if (given && existsSync(join(given, "okf.duckdb"))) return { path: given, remove: () => {} };
  const dir = mkdtempSync(join(tmpdir(), "v2o-plugin-"));
  const path = join(dir, vault.split("/").pop()!);
  run(["convert", vault, "-o", path]);
  run(["index", path, "--embedder", "minilm", "--no-progress"]);
  return { path, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface Server {
  url: string;
  process: ChildProcess;
  stderr: () => string;
  stop: () => Promise<void>;
}

/** Starts `vault2okf serve BUNDLE --port 0 --token TOKEN --llm extract` and waits for the line giving its address. */
export function startServer(bundle: string, token: string): Promise<Server> {
  const child = spawn(PYTHON, ["-m", "vault2okf", "serve", bundle, "--port", "0", "--token", token, "--llm", "extract"], {
    env: ENV,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let err = "";
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  return new Promise((resolvePromise, reject) => {
    child.stderr!.setEncoding("utf-8");
    child.stderr!.on("data", (chunk: string) => {
      err += chunk;
      const m = /serving .* at (http:\/\/\S+?)\/? \(MCP/.exec(err);
      if (m) resolvePromise({ url: m[1], process: child, stderr: () => err, stop });
    });
    child.once("exit", (code) => reject(new Error(`vault2okf serve exited (${code}) before serving:\n${err}`)));
  });
}

/** The vault's markdown notes, with their text and modification times, as the obsidian stub's App takes them. */
export function vaultNotes(vault: string): { path: string; text: string; mtime: number }[] {
  const out: { path: string; text: string; mtime: number }[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const full = join(dir, e.name);
      if (e.isDirectory() && !e.name.startsWith(".")) walk(full);
      else if (e.isFile() && e.name.endsWith(".md")) {
        out.push({ path: relative(vault, full).split("\\").join("/"), text: readFileSync(full, "utf-8"), mtime: statSync(full).mtimeMs });
      }
    }
  };
  walk(vault);
  return out;
}
