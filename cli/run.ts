// The commands of `corq` (cli/main.ts), callable in-process (tests). Every command but
// `migrate` goes through the HTTP API (corq/client); `migrate` talks to DATABASE_URL.
import { parseArgs } from "node:util";
import { CorqHttpError, createClient, type CorqClient } from "../src/client.js";
import type { KeyStatus, StoredEvent } from "../src/types.js";
import { formatTable, formatTime } from "./table.js";

export interface Io {
  env: Record<string, string | undefined>;
  out: { write(text: string): unknown };
  err: { write(text: string): unknown };
  /** Stops `tail --follow` (tests); Ctrl-C otherwise. */
  signal?: AbortSignal;
  fetch?: (request: Request) => Promise<Response>;
}

/** What the exit code says, for scripts. */
export const exitCodes = {
  ok: 0,
  /** the API refused (4xx / 5xx other than below), or the command failed */
  failed: 1,
  /** wrong command line */
  usage: 2,
  /** no answer: the server is down or the URL is wrong */
  unreachable: 3,
  /** 401 / 403: no token, a wrong one, or one without the scope */
  unauthorized: 4,
  /** 404: no such subscription (or route) */
  notFound: 5,
  /** 409: a version conflict, a replay, a subscription defined in code */
  conflict: 6,
} as const;

export const usage = `usage: corq <command> [arguments] [options]

Commands (over the HTTP API):
  stats                               subscriptions with lag, pending and keys by state
  keys <subscription> [--status s]    keys of a subscription (ready|leased|backoff|dead|idle)
                      [--limit n] [--after key]
  dead-letters [<subscription>]       dead keys, newest first
  retry <subscription> [<key>]        release dead keys: run the failed event again
  skip <subscription> [<key>]         release dead keys: skip the failed event
  pause <subscription> [--key k]      stop handing out its keys (--key: that one key; its
                                      events stay queued, in order)
  resume <subscription> [--key k]     hand them out again
  rewind <subscription> --to <p>      deliver again, in order, from position p (inclusive)
         [--key k]                    or "beginning": the whole subscription or one key;
                                      replays get new seqs and "replay": true
  tail [--follow] [--limit n]         the last n (20) events of the global log, in safe read
       [--after position]             order; --follow: then new ones as they come (polls
       [--interval ms]                every --interval, 1000 ms); --after: from there
  append <stream> <json>              append events: one {"name","data","meta"?}, an array of
       [--expected-version n]         them, or {"events":[...]}; -1 = the stream must be new
  tokens create <name> --scopes a,b   a scoped token (append|read|operate|admin); printed once
       [--stream-prefix p]
  tokens list                         tokens, never their secrets
  tokens revoke <id>                  refused from the next request on

Commands (over DATABASE_URL):
  migrate                             apply corq's schema to DATABASE_URL (idempotent)
  serve                               the HTTP API, the dashboard, the advancer and the
                                      consumers of push subscriptions in this process
                                      (PORT, HOST, CORQ_*: docs/self-hosting.md); for code
                                      subscriptions, startServe from "corq/node"

Options:
  --url <url>      the API (env CORQ_URL; default http://127.0.0.1:8787)
  --token <token>  bearer token (env CORQ_TOKEN, else CORQ_ADMIN_TOKEN)
  --json           JSON for scripts instead of tables (tail: one event per line)
  -h, --help       this text

Exit codes: 0 done, 1 refused or failed, 2 usage, 3 server unreachable,
4 unauthorized (401/403), 5 not found (404), 6 conflict (409).
`;

/** The commands that take --key (and rewind's --to): anywhere else they are refused, not ignored. */
const keyCommands = new Set(["pause", "resume", "rewind", "retry", "skip"]);

const options = {
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
  scopes: { type: "string" },
  "stream-prefix": { type: "string" },
  key: { type: "string" },
  to: { type: "string" },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof options; allowPositionals: true }>>["values"];

class UsageError extends Error {}

interface Context {
  client: CorqClient;
  values: Values;
  args: string[];
  io: Io;
  print(value: unknown, table: () => string): void;
}

const statuses = ["ready", "leased", "backoff", "dead", "idle"];

function integer(value: string | undefined, name: string, min = 0): number | undefined {
  if (value === undefined) return undefined;
  if (!/^-?\d+$/.test(value) || Number(value) < min) throw new UsageError(`--${name} must be an integer ≥ ${min}`);
  return Number(value);
}

function positional(ctx: Context, index: number, name: string, optional = false): string {
  const value = ctx.args[index];
  if (value === undefined && !optional) throw new UsageError(`missing <${name}>`);
  return value as string;
}

function noMore(ctx: Context, count: number) {
  if (ctx.args.length > count) throw new UsageError(`unexpected argument: ${ctx.args[count]}`);
}

const commands: Record<string, (ctx: Context) => Promise<void>> = {
  async stats(ctx) {
    noMore(ctx, 0);
    const stats = await ctx.client.stats();
    ctx.print(stats, () =>
      [
        formatTable(
          ["subscription", "kind", "paused", "lag", "pending", "ready", "leased", "backoff", "dead", "oldest pending"],
          stats.subscriptions.map((s) => [
            s.name,
            s.kind,
            s.paused ? "yes" : "",
            s.lag,
            s.pending,
            s.keys.ready,
            s.keys.leased,
            s.keys.backoff,
            s.keys.dead,
            s.oldestPendingAgeMs === null ? "" : `${Math.round(s.oldestPendingAgeMs / 1000)} s`,
          ]),
        ),
        `log: ${stats.log.events} events, head ${stats.log.head ?? "none"}`,
      ].join("\n"),
    );
  },

  async keys(ctx) {
    const subscription = positional(ctx, 0, "subscription");
    noMore(ctx, 1);
    const status = ctx.values.status;
    if (status !== undefined && !statuses.includes(status)) {
      throw new UsageError(`--status must be one of ${statuses.join(", ")}`);
    }
    const page = await ctx.client.keys(subscription, {
      status: status as KeyStatus | undefined,
      limit: integer(ctx.values.limit, "limit", 1),
      after: ctx.values.after,
    });
    ctx.print(page, () => {
      const table = formatTable(
        ["key", "status", "pending", "attempts", "available at", "last error"],
        page.keys.map((k) => [k.key, k.status, k.pending, k.attempts, formatTime(k.availableAt), k.lastError ?? ""]),
      );
      return page.next ? `${table}\nmore: --after ${JSON.stringify(page.next)}` : table;
    });
  },

  async "dead-letters"(ctx) {
    const subscription = positional(ctx, 0, "subscription", true);
    noMore(ctx, 1);
    const list = await ctx.client.deadLetters({ subscription, limit: integer(ctx.values.limit, "limit", 1) });
    ctx.print(list, () =>
      formatTable(
        ["subscription", "key", "position", "attempts", "dead at", "last error"],
        list.deadLetters.map((d) => [
          d.subscription,
          d.key,
          d.position ?? "",
          d.attempts,
          formatTime(d.deadAt),
          d.lastError ?? "",
        ]),
      ),
    );
  },

  async rewind(ctx) {
    const subscription = positional(ctx, 0, "subscription");
    noMore(ctx, 1);
    const to = ctx.values.to;
    if (to === undefined) throw new UsageError('--to is required: a position, or "beginning"');
    if (to !== "beginning" && !/^\d+$/.test(to))
      throw new UsageError('--to must be a position (an integer ≥ 0) or "beginning"');
    const key = keyOption(ctx);
    const result = await ctx.client.rewind(subscription, { to: to === "beginning" ? to : Number(to), key });
    ctx.print(
      result,
      () =>
        `${subscription}${key === undefined ? "" : ` key ${key}`}: ${result.requeued} event(s) queued again from ${to === "beginning" ? "the beginning" : `position ${to}`}`,
    );
  },

  retry: (ctx) => release(ctx, "retry"),
  skip: (ctx) => release(ctx, "skip"),
  pause: (ctx) => setPaused(ctx, "pause"),
  resume: (ctx) => setPaused(ctx, "resume"),

  async tail(ctx) {
    noMore(ctx, 0);
    const count = integer(ctx.values.limit, "limit", 1) ?? 20;
    const interval = integer(ctx.values.interval, "interval", 10) ?? 1000;
    let after = integer(ctx.values.after, "after") ?? (await nearHead(ctx.client, count));
    const print = (events: StoredEvent[]) => {
      for (const event of events) {
        ctx.io.out.write(
          ctx.values.json
            ? `${JSON.stringify(event)}\n`
            : `${event.position}\t${formatTime(event.createdAt)}\t${event.stream}@${event.version}\t${event.name}\t${JSON.stringify(event.data)}\n`,
        );
      }
    };
    const first = await ctx.client.readLog({ after, limit: count });
    print(first.events);
    after = first.next ?? after;
    // --follow: read on after the last event shown (a cursor in the safe read order: an event
    // whose transaction commits late still comes, after the ones shown)
    while (ctx.values.follow) {
      const page = await ctx.client.readLog({ after, limit: 1000 });
      print(page.events);
      after = page.next ?? after;
      if (page.events.length < 1000 && (await sleep(interval, ctx.io.signal))) return;
    }
  },

  async append(ctx) {
    const stream = positional(ctx, 0, "stream");
    const text = positional(ctx, 1, "json");
    noMore(ctx, 2);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new UsageError("<json> is not valid JSON");
    }
    const events = Array.isArray(parsed)
      ? parsed
      : typeof parsed === "object" && parsed !== null && "events" in parsed
        ? (parsed as { events: unknown }).events
        : [parsed];
    const result = await ctx.client.append(stream, events as never, {
      expectedVersion: integer(ctx.values["expected-version"], "expected-version", -1),
    });
    ctx.print(result, () => `${result.stream} at version ${result.version}, positions ${result.positions.join(", ")}`);
  },

  async migrate(ctx) {
    noMore(ctx, 0);
    const databaseUrl = ctx.io.env.DATABASE_URL;
    if (!databaseUrl) throw new UsageError("set DATABASE_URL to the database to migrate");
    const { createCorq } = await import("../src/index.js");
    const corq = createCorq({ databaseUrl });
    try {
      const { applied } = await corq.migrate();
      ctx.print({ applied }, () => (applied.length ? `applied ${applied.join(", ")}` : "up to date"));
    } finally {
      await corq.close();
    }
  },

  async serve(ctx) {
    noMore(ctx, 0);
    if (!ctx.io.env.DATABASE_URL) throw new UsageError("set DATABASE_URL to the Postgres to serve");
    const { startServe, stopOnSignals } = await import("../src/node/serve.js");
    const log = (line: string) => ctx.io.out.write(`corq: ${line}\n`);
    // push subscriptions only: code subscriptions live in the app's own process (corq/node)
    const running = await startServe({ subscriptions: [], env: ctx.io.env, log });
    stopOnSignals(running, log); // exits the process when stopped
    ctx.io.out.write(`corq ready ${running.url}\n`);
    await new Promise<never>(() => undefined);
  },

  async tokens(ctx) {
    const action = positional(ctx, 0, "create|list|revoke");
    if (action === "list") {
      noMore(ctx, 1);
      const list = await ctx.client.tokens();
      ctx.print(list, () =>
        formatTable(
          ["id", "name", "scopes", "stream prefix", "created", "last used"],
          list.tokens.map((t) => [
            t.id,
            t.name,
            t.scopes.join(","),
            t.streamPrefix ?? "",
            formatTime(t.createdAt),
            formatTime(t.lastUsedAt),
          ]),
        ),
      );
    } else if (action === "create") {
      const name = positional(ctx, 1, "name");
      noMore(ctx, 2);
      if (!ctx.values.scopes) throw new UsageError("--scopes is required (append, read, operate, admin)");
      const created = await ctx.client.createToken({
        name,
        scopes: ctx.values.scopes.split(",").map((s) => s.trim()) as never,
        streamPrefix: ctx.values["stream-prefix"],
      });
      ctx.print(created, () => `token ${created.id} (${created.scopes.join(",")}): ${created.token}\nshown only now`);
    } else if (action === "revoke") {
      const id = positional(ctx, 1, "id");
      noMore(ctx, 2);
      await ctx.client.revokeToken(id);
      ctx.print({ revoked: id }, () => `revoked ${id}`);
    } else {
      throw new UsageError(`unknown tokens action: ${action} (create, list, revoke)`);
    }
  },
};

/**
 * A cursor about `count` events before the log's head (positions can have gaps — a rolled-back
 * append leaves one — and a cursor must name an event, so step down to one that exists).
 */
async function nearHead(client: CorqClient, count: number): Promise<number> {
  const { head } = (await client.stats()).log;
  for (let position = (head ?? 0) - count, tries = 0; position > 0 && tries < 100; position--, tries++) {
    try {
      await client.readLog({ after: position, limit: 1 });
      return position;
    } catch (error) {
      if (!(error instanceof CorqHttpError && error.status === 400)) throw error;
    }
  }
  return 0;
}

/** --key: one key (the rule of docs/http-api.md is the server's; "." and ".." cannot be a path segment). */
function keyOption(ctx: Context): string | undefined {
  const key = ctx.values.key;
  if (key === "" || key === "." || key === "..") throw new UsageError(`--key: not a key: ${JSON.stringify(key)}`);
  return key;
}

async function release(ctx: Context, mode: "retry" | "skip") {
  const subscription = positional(ctx, 0, "subscription");
  const given = positional(ctx, 1, "key", true);
  noMore(ctx, 2);
  const option = keyOption(ctx);
  if (given !== undefined && option !== undefined && given !== option)
    throw new UsageError("give the key once: <key> or --key");
  const key = given ?? option;
  const result = await ctx.client.releaseDeadLetters({ subscription, key, mode });
  ctx.print(result, () => `${mode === "retry" ? "retried" : "skipped"}: ${result.released} dead key(s)`);
}

async function setPaused(ctx: Context, action: "pause" | "resume") {
  const subscription = positional(ctx, 0, "subscription");
  noMore(ctx, 1);
  const key = keyOption(ctx);
  if (key !== undefined) {
    const state = await ctx.client[action === "pause" ? "pauseKey" : "resumeKey"](subscription, key);
    ctx.print(
      state,
      () => `${subscription} key ${state.key} ${state.status === "paused" ? "paused" : `resumed (${state.reason})`}`,
    );
    return;
  }
  const stats = await ctx.client[action](subscription);
  ctx.print(stats, () => `${stats.name} ${stats.paused ? "paused" : "running"}`);
}

/** Waits `ms`; true when `signal` stopped the wait. */
function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    const stop = () => {
      clearTimeout(timer);
      resolve(true);
    };
    signal?.addEventListener("abort", stop, { once: true });
  });
}

/** `--expected-version -1`: parseArgs would take "-1" for an option; it is the value. */
function joinNegativeValues(argv: string[]): string[] {
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

export async function run(argv: string[], io: Io): Promise<number> {
  let parsed: { values: Values; positionals: string[] };
  try {
    parsed = parseArgs({ args: joinNegativeValues(argv), options, allowPositionals: true, strict: true });
  } catch (error) {
    io.err.write(`corq: ${(error as Error).message}\n\n${usage}`);
    return exitCodes.usage;
  }
  const { values, positionals } = parsed;
  const [name, ...args] = positionals;
  if (values.help || name === "help") {
    io.out.write(usage);
    return exitCodes.ok;
  }
  const command = name === undefined ? undefined : commands[name];
  if (!command) {
    io.err.write(`${name === undefined ? "" : `corq: unknown command: ${name}\n\n`}${usage}`);
    return exitCodes.usage;
  }
  // a --key another command would ignore could widen what it does (skip every dead key): refused
  for (const option of ["key", "to"] as const) {
    if (values[option] !== undefined && !(keyCommands.has(name as string) && (option === "key" || name === "rewind"))) {
      io.err.write(`corq: ${name} takes no --${option}\n`);
      return exitCodes.usage;
    }
  }
  const url = values.url ?? io.env.CORQ_URL ?? "http://127.0.0.1:8787";
  const token = values.token ?? io.env.CORQ_TOKEN ?? io.env.CORQ_ADMIN_TOKEN;
  const ctx: Context = {
    client: createClient({ url, token, fetch: io.fetch }),
    values,
    args,
    io,
    print: (value, table) => io.out.write(`${values.json ? JSON.stringify(value, null, 2) : table()}\n`),
  };
  try {
    await command(ctx);
    return exitCodes.ok;
  } catch (error) {
    return report(error, io, url);
  }
}

function report(error: unknown, io: Io, url: string): number {
  if (error instanceof UsageError) {
    io.err.write(`corq: ${error.message}\n`);
    return exitCodes.usage;
  }
  if (error instanceof CorqHttpError) {
    const { problem } = error;
    const details = (Array.isArray(problem.errors) ? problem.errors : [])
      .map((e) => `\n  ${e.path}: ${e.message}`)
      .join("");
    io.err.write(`corq: ${problem.status} ${problem.title}: ${problem.detail}${details}\n`);
    if (error.status === 401 || error.status === 403) return exitCodes.unauthorized;
    if (error.status === 404) return exitCodes.notFound;
    if (error.status === 409) return exitCodes.conflict;
    return exitCodes.failed;
  }
  // fetch failed before any answer: refused, DNS, TLS
  if (error instanceof TypeError && /fetch failed|Failed to fetch|Invalid URL/i.test(error.message)) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    io.err.write(`corq: no answer from ${url}: ${cause?.code ?? cause?.message ?? error.message}\n`);
    return exitCodes.unreachable;
  }
  io.err.write(`corq: ${error instanceof Error ? error.message : String(error)}\n`);
  return exitCodes.failed;
}
