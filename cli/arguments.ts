// The command line as `corq` reads it: the options, the positional arguments, the checks that
// refuse what a command would otherwise ignore, and the context a command runs with.
import type { parseArgs } from "node:util";
import type { CorqClient } from "../src/client.js";

export interface Io {
  env: Record<string, string | undefined>;
  out: { write(text: string): unknown };
  err: { write(text: string): unknown };
  /** Stops `tail --follow` (tests); Ctrl-C otherwise. */
  signal?: AbortSignal;
  fetch?: (request: Request) => Promise<Response>;
}

/** The commands that take --key: anywhere else it is refused, not ignored. */
export const keyCommands = new Set(["pause", "resume", "rewind", "retry", "skip"]);

export const options = {
  url: { type: "string" },
  token: { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
  status: { type: "string" },
  limit: { type: "string" },
  after: { type: "string" },
  follow: { type: "boolean", short: "f" },
  interval: { type: "string" },
  "expected-version": { type: "string" },
  "idempotency-key": { type: "string" },
  scopes: { type: "string" },
  "stream-prefix": { type: "string" },
  key: { type: "string" },
  to: { type: "string" },
  // corq doctor, corq alerts put
  "held-over": { type: "string" },
  // corq alerts put
  on: { type: "string" },
  "lag-over": { type: "string" },
  "min-interval": { type: "string" },
  secret: { type: "string" },
  // corq dev
  config: { type: "string" },
  port: { type: "string" },
  "data-dir": { type: "string" },
  "cron-interval": { type: "string" },
  "base-path": { type: "string" },
  // corq cells move
  "wait-ms": { type: "string" },
  tenant: { type: "string" },
  slot: { type: "string" },
} as const;

/** Options only some commands read: anywhere else they are refused, not ignored. */
export const commandOnlyOptions: Partial<Record<keyof typeof options, string[]>> = {
  to: ["rewind", "cells"],
  "held-over": ["doctor", "alerts"],
  on: ["alerts"],
  "lag-over": ["alerts"],
  "min-interval": ["alerts"],
  secret: ["alerts"],
  config: ["dev"],
  port: ["dev"],
  "data-dir": ["dev"],
  "cron-interval": ["dev"],
  "base-path": ["dev"],
  "wait-ms": ["cells"],
  tenant: ["cells"],
  slot: ["cells"],
};

export type Values = ReturnType<typeof parseArgs<{ options: typeof options; allowPositionals: true }>>["values"];

export class UsageError extends Error {}

export interface Context {
  client: CorqClient;
  values: Values;
  args: string[];
  io: Io;
  print(value: unknown, table: () => string): void;
}

export const statuses = ["ready", "leased", "backoff", "dead", "idle"];

export function integer(
  value: string | undefined,
  { name, min = 0 }: { name: string; min?: number },
): number | undefined {
  if (value === undefined) return undefined;
  if (!/^-?\d+$/.test(value) || Number(value) < min) throw new UsageError(`--${name} must be an integer ≥ ${min}`);
  return Number(value);
}

export function positional(
  ctx: Context,
  { index, name, optional = false }: { index: number; name: string; optional?: boolean },
): string {
  const value = ctx.args[index];
  if (value === undefined && !optional) throw new UsageError(`missing <${name}>`);
  return value as string;
}
export function noMore(ctx: Context, count: number) {
  if (ctx.args.length > count) throw new UsageError(`unexpected argument: ${ctx.args[count]}`);
}

/** --key: one key (the rule of docs/http-api.md is the server's; "." and ".." cannot be a path segment). */
export function keyOption(ctx: Context): string | undefined {
  const key = ctx.values.key;
  if (key === "" || key === "." || key === "..") throw new UsageError(`--key: not a key: ${JSON.stringify(key)}`);
  return key;
}

/** `--expected-version -1`: parseArgs would take "-1" for an option; it is the value. */
export function joinNegativeValues(argv: string[]): string[] {
  const joined: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const next = argv[i + 1];
    const name = arg.startsWith("--") ? arg.slice(2) : "";
    if (next !== undefined && /^-\d+$/.test(next) && options[name as keyof typeof options]?.type === "string") {
      joined.push(`${arg}=${next}`);
      i++;
    } else joined.push(arg);
  }
  return joined;
}
