import type { BuildOptions } from "esbuild";
export const OPTIONS: BuildOptions;
