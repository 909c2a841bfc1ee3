// The commands of `corq`, by name: over the HTTP API (corqueue/client), but `migrate` and `serve` over DATABASE_URL,
// `cells` over CORQ_CELLS (cellsCommand.ts), and `dev`, the local stack around the user's Worker (cli/dev/).
import { CorqHttpError, type CorqClient } from "../src/client.js";
import type { KeyStatus, StoredEvent } from "../src/types.js";
import { alertsCommand } from "./alertsCommand.js";
import { cellsCommand } from "./cellsCommand.js";
import { integer, keyOption, noMore, positional, statuses, UsageError, type Context } from "./arguments.js";
import { exitCodes } from "./output.js";
import { formatTable, formatTime, wrap } from "./table.js";

/** A command; the exit code it returns when it finished but has something to say by it (doctor). */
// biome-ignore lint/suspicious/noConfusingVoidType: most commands return nothing (exit 0)
export const commands: Record<string, (ctx: Context) => Promise<void | number>> = {
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
            // past 10,000 the lag is an estimate (stats count no further)
            s.lagEstimated ? `≈ ${s.lag}` : s.lag,
            s.pending,
            s.keys.ready,
            s.keys.leased,
            s.keys.backoff,
            s.keys.dead,
            s.oldestPendingAgeMs === null ? "" : `${Math.round(s.oldestPendingAgeMs / 1000)} s`,
          ]),
        ),
        `log: ${stats.log.eventsEstimated ? "≈ " : ""}${stats.log.events} events, head ${stats.log.head ?? "none"}`,
      ].join("\n"),
    );
  },

  async keys(ctx) {
    const subscription = positional(ctx, { index: 0, name: "subscription" });
    noMore(ctx, 1);
    const status = ctx.values.status;
    if (status !== undefined && !statuses.includes(status)) {
      throw new UsageError(`--status must be one of ${statuses.join(", ")}`);
    }
    const page = await ctx.client.keys(subscription, {
      status: status as KeyStatus | undefined,
      limit: integer(ctx.values.limit, { name: "limit", min: 1 }),
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
    const subscription = positional(ctx, { index: 0, name: "subscription", optional: true });
    noMore(ctx, 1);
    const list = await ctx.client.deadLetters({
      subscription,
      limit: integer(ctx.values.limit, { name: "limit", min: 1 }),
    });
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
    const subscription = positional(ctx, { index: 0, name: "subscription" });
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
    const count = integer(ctx.values.limit, { name: "limit", min: 1 }) ?? 20;
    const interval = integer(ctx.values.interval, { name: "interval", min: 10 }) ?? 1000;
    let after = integer(ctx.values.after, { name: "after" }) ?? (await nearHead(ctx.client, count));
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
    const stream = positional(ctx, { index: 0, name: "stream" });
    const text = positional(ctx, { index: 1, name: "json" });
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
      expectedVersion: integer(ctx.values["expected-version"], { name: "expected-version", min: -1 }),
      idempotencyKey: ctx.values["idempotency-key"],
    });
    ctx.print(
      result,
      () =>
        `${result.stream} at version ${result.version}, positions ${result.positions.join(", ")}` +
        (result.replayed ? " (the first append with this key: nothing written)" : ""),
    );
  },

  async doctor(ctx) {
    noMore(ctx, 0);
    const report = await ctx.client.doctor({ heldOverMs: integer(ctx.values["held-over"], { name: "held-over" }) });
    ctx.print(report, () => {
      const errors = report.findings.filter((f) => f.severity === "error").length;
      const warnings = report.findings.length - errors;
      if (report.findings.length === 0) return "ok: nothing to report";
      const counted = [plural(errors, "error"), plural(warnings, "warning")].filter(Boolean).join(", ");
      const blocks = report.findings.map((f) =>
        [`${f.severity} ${f.code}`, wrap(f.message, { indent: "  " }), wrap(`fix: ${f.fix}`, { indent: "  " })].join(
          "\n",
        ),
      );
      return [`${report.ok ? "ok" : "not ok"}: ${counted}`, ...blocks].join("\n\n");
    });
    // an error finding needs action: a script (a deploy check, a cron) sees it in the exit code
    return report.ok ? exitCodes.ok : exitCodes.failed;
  },

  alerts: alertsCommand,

  // over CORQ_CELLS: the cells of a deployment, each its own database
  cells: cellsCommand,

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
    // push subscriptions only: code subscriptions live in the app's own process (corqueue/node)
    const running = await startServe({ subscriptions: [], env: ctx.io.env, log });
    stopOnSignals(running, log); // exits the process when stopped
    ctx.io.out.write(`corq ready ${running.url}\n`);
    await new Promise<never>(() => undefined);
  },

  async dev(ctx) {
    noMore(ctx, 0);
    const { env } = ctx.io;
    const { findWranglerConfig, installHint, missingPackages } = await import("./dev/requirements.js");
    const cwd = process.cwd();
    const config = findWranglerConfig(cwd, ctx.values.config);
    if (!config)
      throw new UsageError(
        ctx.values.config === undefined
          ? `no wrangler.toml (or wrangler.json / wrangler.jsonc) in ${cwd}: run corq dev in your Worker's directory, or pass --config <path>`
          : `--config: no such file: ${ctx.values.config}`,
      );
    const portText = ctx.values.port ?? env.PORT;
    const port = portText === undefined ? 8787 : Number(portText);
    if (!/^\d+$/.test(portText ?? "0") || port > 65535)
      throw new UsageError(`${ctx.values.port !== undefined ? "--port" : "PORT"}=${portText} is not a port number`);
    const cronIntervalMs = integer(ctx.values["cron-interval"], { name: "cron-interval" }) ?? 1000;
    // where the Worker mounts corq (createWorker's basePath): its /health is there
    const { parseBasePath } = await import("../src/http/basePath.js");
    let basePath: string;
    try {
      basePath = parseBasePath(ctx.values["base-path"]);
    } catch (error) {
      throw new UsageError(`--base-path: ${(error as Error).message.replace(/^basePath: /, "")}`);
    }
    const missing = missingPackages({ embedded: !env.DATABASE_URL });
    if (missing.length > 0) throw new UsageError(installHint(missing));
    const { runDev } = await import("./dev/devCommand.js");
    await runDev({
      config,
      port,
      portHint: ctx.values.port !== undefined ? "pass another --port" : "set PORT= to another port",
      dataDir: ctx.values["data-dir"] ?? env.CORQ_DATA_DIR ?? ".corq",
      cronIntervalMs,
      basePath,
      env,
    });
  },

  async tokens(ctx) {
    const action = positional(ctx, { index: 0, name: "create|list|revoke" });
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
      const name = positional(ctx, { index: 1, name: "name" });
      noMore(ctx, 2);
      if (!ctx.values.scopes) throw new UsageError("--scopes is required (append, read, operate, admin)");
      const created = await ctx.client.createToken({
        name,
        scopes: ctx.values.scopes.split(",").map((s) => s.trim()) as never,
        streamPrefix: ctx.values["stream-prefix"],
      });
      ctx.print(created, () => `token ${created.id} (${created.scopes.join(",")}): ${created.token}\nshown only now`);
    } else if (action === "revoke") {
      const id = positional(ctx, { index: 1, name: "id" });
      noMore(ctx, 2);
      await ctx.client.revokeToken(id);
      ctx.print({ revoked: id }, () => `revoked ${id}`);
    } else {
      throw new UsageError(`unknown tokens action: ${action} (create, list, revoke)`);
    }
  },
};

const plural = (n: number, word: string) => (n === 0 ? "" : `${n} ${word}${n === 1 ? "" : "s"}`);

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

async function release(ctx: Context, mode: "retry" | "skip") {
  const subscription = positional(ctx, { index: 0, name: "subscription" });
  const given = positional(ctx, { index: 1, name: "key", optional: true });
  noMore(ctx, 2);
  const option = keyOption(ctx);
  if (given !== undefined && option !== undefined && given !== option)
    throw new UsageError("give the key once: <key> or --key");
  const key = given ?? option;
  const result = await ctx.client.releaseDeadLetters({ subscription, key, mode });
  ctx.print(result, () => `${mode === "retry" ? "retried" : "skipped"}: ${result.released} dead key(s)`);
}

async function setPaused(ctx: Context, action: "pause" | "resume") {
  const subscription = positional(ctx, { index: 0, name: "subscription" });
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
