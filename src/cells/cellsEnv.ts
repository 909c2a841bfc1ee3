// The cells of a deployment as the environment names them (docs/cli.md, "corq cells"), for
// `corq cells` and any runtime that reads its cells from the environment:
//   CORQ_CELLS           name=postgres://… pairs, separated by whitespace or newlines, home first
//   CORQ_DIRECTORY_URL   where the directory lives (default: the home cell's database)
// An error names the entry by its position and cell, never with its password (a connection
// string carries one): only a URL's scheme and host are shown.
import { CorqError } from "../errors.js";
import { redactedUrl } from "../http/redactedUrl.js";

export interface CellsEnv {
  /** The cells by name, home first (createCells' `cells`). */
  cells: Record<string, string>;
  directoryUrl?: string;
}

const cellName = /^[A-Za-z0-9_-]{1,40}$/;

export function parseCellsEnv(env: Record<string, string | undefined>): CellsEnv {
  const entries = (env.CORQ_CELLS ?? "").split(/\s+/).filter(Boolean);
  if (entries.length === 0)
    throw invalid("CORQ_CELLS is not set: name the cells, home first, as name=postgres://… pairs");
  const cells: Record<string, string> = {};
  const order: string[] = [];
  entries.forEach((entry, index) => {
    const at = `CORQ_CELLS entry ${index + 1}`;
    // a URL may have "=" in its query (?sslmode=require): the name ends at the first one
    const equals = entry.indexOf("=");
    if (equals < 0) throw invalid(`${at} is not name=postgres://…: ${shown(entry, { name: true })}`);
    const name = entry.slice(0, equals);
    const url = entry.slice(equals + 1);
    if (!cellName.test(name))
      throw invalid(`${at}: the cell name ${shown(name, { name: true })} is not 1-40 letters, digits, _ or -`);
    if (name in cells) throw invalid(`${at}: cell "${name}" is named twice`);
    if (!isPostgresUrl(url))
      throw invalid(`${at}: cell "${name}" has ${shown(url)}, not a postgres:// or postgresql:// URL`);
    cells[name] = url;
    order.push(name);
  });
  // an object lists names that are integers ("1", "2") first, in numeric order: the home cell
  // (the first) would silently become another one
  if (Object.keys(cells).join(" ") !== order.join(" "))
    throw invalid(
      `CORQ_CELLS: the cell names ${order.join(", ")} would be read in another order (names of digits only ` +
        "are sorted by number): give the cells names with a letter",
    );
  const directoryUrl = env.CORQ_DIRECTORY_URL?.trim() || undefined;
  if (directoryUrl !== undefined && !isPostgresUrl(directoryUrl))
    throw invalid(`CORQ_DIRECTORY_URL (${shown(directoryUrl)}) is not a postgres:// or postgresql:// URL`);
  return directoryUrl === undefined ? { cells } : { cells, directoryUrl };
}

function isPostgresUrl(text: string): boolean {
  try {
    const { protocol } = new URL(text);
    return protocol === "postgres:" || protocol === "postgresql:";
  } catch {
    return false;
  }
}

/**
 * A value in an error. A connection string is shown by its scheme and host only; anything else
 * that may hold a secret (a libpq "password=…" pair is an entry whose name is "password") is not
 * shown at all, only a plain cell name is.
 */
function shown(text: string, { name = false } = {}): string {
  if (text === "") return "nothing";
  if (text.includes("://")) return `"${redactedUrl(text)}…"`;
  if (!name || /[^A-Za-z0-9_.-]/.test(text)) return "(not shown)";
  return JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);
}

const invalid = (message: string) => new CorqError("invalid_config", message);
