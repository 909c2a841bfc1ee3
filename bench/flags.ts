// What the standalone bench scripts (`npx tsx bench/<script>.ts --name n`) read from their command
// line, and the load they print beside each figure.
import { loadavg } from "node:os";

/** `--name n`: a positive integer, or `fallback` when the flag is not given. */
export function positiveFlag(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  const value = at >= 0 ? Number(process.argv[at + 1]) : fallback;
  if (!Number.isInteger(value) || value <= 0) throw new Error(`--${name}: a positive integer`);
  return value;
}

/** The 1-, 5- and 15-minute load averages, as printed beside a figure. */
export const loadAverages = () =>
  loadavg()
    .map((n) => n.toFixed(2))
    .join(" ");
