// What createCorq takes: the connection, the subscriptions it runs, and how this instance behaves.
import type { Connection, Session } from "../db/executor.js";
import type { RetryPolicy } from "../db/retries.js";
import type { AppMigration } from "../db/appMigrations.js";
import type { AnyEvents, EventMap, EventSchemas } from "./events.js";
import type { RetentionPolicy } from "./retention.js";
import type { SubscriptionDefinition } from "./subscriptionDefinition.js";

export interface CorqOptions<E extends EventMap = AnyEvents> {
  /** Postgres connection string; corq creates (and closes) a node-postgres pool. */
  databaseUrl?: string;
  /** Or an existing connection: a pg / Neon Pool or Client, or a drizzle database. */
  db?: Connection | { $client: Connection };
  subscriptions?: SubscriptionDefinition<E>[];
  /**
   * Standard Schema validators by event name, for every subscription that takes the name (a
   * subscription's own `schemas` win): see SubscriptionDefinition.schemas.
   */
  schemas?: EventSchemas<E>;
  /** The app's own schema (its tables), applied by migrate() after corq's, each once (db/appMigrations.ts). */
  migrations?: AppMigration[];
  /** Events scanned per advance statement (default 5,000). */
  advanceBatchSize?: number;
  /** Max connections of the pool corq creates from databaseUrl (default 10). */
  poolSize?: number;
  /**
   * How corq reaches databaseUrl: "pg" (default: a node-postgres pool), or "neon-http" (Neon's
   * HTTP query path: one HTTPS request per statement, no connection to open or hold — for
   * serverless functions; interactive transactions such as migrate() then use a short-lived
   * node-postgres connection).
   */
  driver?: "pg" | "neon-http";
  /** With `db` set to a neon() HTTP query function: opens a pool for an interactive transaction. */
  session?: Session;
  /** Called with the text of every statement corq sends (round-trip accounting). */
  onStatement?: (text: string) => void;
  /**
   * How long a statement that fails on a connection error (a restart, a terminated backend, a
   * waking Neon compute, a pooler that lost its server) is sent again on a new connection, with
   * jittered backoff, before the error goes up as `database_unavailable`: `withinMs` from the
   * first send (default 5,000; 0: never), and `allowed`, asked before each resend (false stops:
   * the Worker's budget of subrequests). Only what is safe to send again is: an append only when
   * the error proves it did not commit (docs/operations.md, "Connections that drop").
   */
  retries?: RetryPolicy;
  /**
   * Let push subscriptions deliver to loopback, private, link-local and other non-public
   * addresses (default: refused, against SSRF; in Node, `CORQ_PUSH_ALLOW_PRIVATE=true` sets it).
   */
  pushAllowPrivate?: boolean;
  /**
   * Who this instance's consumers are, recorded on every lease they take (the keys API and the
   * dashboard show it). Default: "process <pid> …" in Node, "invocation …" elsewhere, with a
   * random id per instance.
   */
  holder?: string;
  /**
   * NOTIFY after an append commits, so `npm run serve` processes on the same database wake at
   * once instead of at their safety-net timer; and after an `advance()` that enqueued events
   * (payload "ready"; not one with `consumesEnqueued`), so they deliver what this advancer
   * enqueued for them (a push subscription's events, or their own appends, which found this
   * advancer at work) at once too. An append in its own transaction NOTIFYs in a
   * statement of its own right after its commit, coalesced (at most one in flight, one more
   * after it for the appends that committed meanwhile); an append in the caller's transaction
   * NOTIFYs inside it (delivered at that commit; Postgres folds repeats). Why not always inside:
   * a transaction that NOTIFYs holds a global lock through its commit's WAL flush, so such
   * commits run one at a time (measured in bench/RESULTS.md). Default false: on Workers nobody
   * listens.
   */
  notify?: boolean;
  /**
   * How long the batches this instance's drains acked may wait in memory before they are written
   * to the activity record (the dashboard's timeline, the /metrics batch histogram), in ms. 0
   * (default): by the time each drain returns — right for a function that ends with its drain.
   * A long-lived process sets more (`npm run serve`: 1,000) and writes one statement per interval
   * instead of one per drain; close() writes what waits, a crash loses at most that much.
   */
  activityFlushMs?: number;
  /**
   * How long a key may stay idle — nothing queued, no lease, not dead, not paused — before its
   * row is deleted by housekeeping (the Worker's cron, `serve`), in ms. Default 7 days. A key
   * that comes back gets a new row, and its seqs go on above every seq it had.
   */
  keyIdleMs?: number;
  /**
   * How long an append's `idempotencyKey` answers with that append (CORQ_IDEMPOTENCY_TTL_MS), in
   * ms: default 24 hours, at most 366 days. Housekeeping prunes the keys past it.
   */
  idempotencyTtlMs?: number;
  /**
   * The retention policy this app deploys with (docs/operations.md, "Retention"): off when left out. It is
   * applied when it differs from the option last applied (a deploy that changes it); a policy
   * set since with setRetention / PUT /retention stays in force until then.
   */
  retention?: RetentionPolicy;
}
