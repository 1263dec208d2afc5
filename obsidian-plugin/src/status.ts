/** The status line: is the server there, is the token right, which bundle, is it older than the vault. Pure. */
import type { BundleInfo, Health } from "./api";
import { ServerError, START_HINT } from "./client";

export type Level = "ok" | "warn" | "error";

export interface Status {
  level: Level;
  text: string;
  bundle: BundleInfo | null; // the bundle the plugin asks, when there is one
}

export interface VaultChange {
  path: string; // the vault's most recently modified note
  mtime: number; // ms since the epoch
}

/** Changes within this much of the conversion are taken as part of it (file systems round mtimes). */
const SLACK_MS = 2000;

/**
 * The bundle to use: the one named in the settings, else the one converted from this vault, else the only one.
 * A string says why none could be chosen.
 */
export function pickBundle(health: Health, wanted: string, vaultPath: string | null): BundleInfo | string {
  const names = health.bundles.map((b) => b.name).join(", ") || "none";
  if (wanted) return health.bundles.find((b) => b.name === wanted) ?? `the server has no bundle "${wanted}" (it serves: ${names})`;
  if (vaultPath) {
    const ours = health.bundles.filter((b) => b.vault !== null && samePath(b.vault, vaultPath));
    if (ours.length === 1) return ours[0];
  }
  if (health.bundles.length === 1) return health.bundles[0];
  return `the server serves ${health.bundles.length} bundles (${names}): choose one in the settings`;
}

export function serverStatus(input: {
  health?: Health;
  error?: unknown;
  wanted: string;
  vaultPath: string | null;
  newest: VaultChange | null;
}): Status {
  const { health, error } = input;
  if (error !== undefined || !health) return failedStatus(error);
  const bundle = pickBundle(health, input.wanted, input.vaultPath);
  if (typeof bundle === "string") return { level: "error", text: bundle, bundle: null };
  const name = `bundle ${bundle.name}`;
  if (bundle.index !== "ready") {
    const how = bundle.index === "missing" ? `\`vault2okf index ${bundle.path}\`` : "wait, or re-run `vault2okf index`";
    return { level: "warn", text: `${name}: index ${bundle.index}; asking and related notes need it: ${how}`, bundle };
  }
  if (input.vaultPath && bundle.vault && !samePath(bundle.vault, input.vaultPath)) {
    return { level: "warn", text: `${name} was converted from ${bundle.vault}, not from this vault (${input.vaultPath})`, bundle };
  }
  const stale = staleness(bundle, input.newest);
  if (stale) return { level: "warn", text: `${name} is stale: ${stale}`, bundle };
  const when = bundle.converted_at ? `, converted ${shortTime(bundle.converted_at)}` : "";
  return { level: "ok", text: `vault2okf: ${name} (${bundle.notes} notes${when})`, bundle };
}

/** Why the bundle is older than the vault, or null when it is not (or nothing says when it was converted). */
export function staleness(bundle: BundleInfo, newest: VaultChange | null): string | null {
  if (!bundle.converted_at || !newest) return null;
  const converted = Date.parse(bundle.converted_at);
  if (Number.isNaN(converted) || newest.mtime <= converted + SLACK_MS) return null;
  const vault = bundle.vault ?? "VAULT";
  return (
    `converted ${shortTime(bundle.converted_at)}, but ${newest.path} changed ${shortTime(new Date(newest.mtime).toISOString())}; ` +
    `re-run \`vault2okf convert ${vault} -o ${bundle.path}\` (or keep \`vault2okf watch\` running)`
  );
}

function failedStatus(error: unknown): Status {
  if (error instanceof ServerError) {
    if (error.failure === "down") return { level: "error", text: `vault2okf is not running: ${START_HINT}`, bundle: null };
    return { level: "error", text: error.message, bundle: null };
  }
  return { level: "error", text: `vault2okf: ${error instanceof Error ? error.message : String(error)}`, bundle: null };
}

/** The newest modification among the vault's notes. */
export function newestChange(files: { path: string; mtime: number }[]): VaultChange | null {
  let newest: VaultChange | null = null;
  for (const f of files) if (!newest || f.mtime > newest.mtime) newest = { path: f.path, mtime: f.mtime };
  return newest;
}

/** `2026-12-04 17:20` (UTC) from an ISO-8601 time. */
export function shortTime(iso: string): string {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? iso : new Date(t).toISOString().slice(0, 16).replace("T", " ") + " UTC";
}

/** The bundle's vault (a folder, or only its name) is the folder `vaultPath`. */
function samePath(bundleVault: string, vaultPath: string): boolean {
  const norm = (p: string) => p.replace(/\\/g, "/").replace(/\/+$/, "");
  const a = norm(bundleVault);
  const b = norm(vaultPath);
  return a.includes("/") ? a === b : a === b.slice(b.lastIndexOf("/") + 1);
}
