// The load of issue 48's fault scenarios and of its measurement (bench/faults.ts): HTTP appends
// to a running corq (serve, or the Worker's front door) and library appends beside them, a push
// subscription (put over HTTP, delivered by that runtime to a receiver here) and a code
// subscription consumed by the library in this process (drain and consume side by side) — all
// while `faults` does its worst to the database. Then it waits for every event of the log to
// reach both subscriptions and says what came: lost, out of order, duplicates, and how late each
// event came beyond the time the database was unreachable.
//
// Time: an event's append time is its created_at (the database's now() at the append's
// transaction start; the same machine's clock as Date.now() here), its delivery time the
// receiver's arrival or the handler's start, its first delivery only. Its delay beyond the
// outage: delivery − append − the part of [append, delivery] the database was unreachable
// (`faults` says when: a restart's stop to its start; a terminated connection is no outage).
import pg from "pg";
import { createCorq } from "../../src/index.js";
import { CorqError } from "../../src/errors.js";
import { sleep } from "./corq.js";
import { tally } from "./chaos.js";
import { startReceiver } from "./receiver.js";

export const FAULT_EVENT = "FaultStep";

export interface Outage {
  from: number;
  to: number;
}

export interface FaultLoadOptions {
  /** The HTTP API (serve's, or the Worker's front door) and its admin token. */
  api: { url: string; adminToken: string };
  /** The database the library connects to (the same one the API runs on). */
  databaseUrl: string;
  random: () => number;
  /** How long appends flow (and `faults` runs). */
  durationMs: number;
  /** HTTP appends per second (spread over 3 writers) and library appends per second (one writer). */
  httpRate: number;
  libraryRate: number;
  /** Streams (= keys) the events go to. */
  streams: number;
  /** Both subscriptions' lease: a delay as long as it is what the scenarios must not see. */
  leaseMs: number;
  /**
   * The faults, while appends flow: runs until `over()` says the load is done, and returns the
   * times the database was unreachable (nothing for terminations: a new connection works at once).
   */
  faults: (over: () => boolean) => Promise<Outage[]>;
  /** After the load, how long to wait for every event to be delivered before counting it lost. */
  settleMs: number;
  /** The pause of the library's advance loop when it has advanced (default 100 ms). */
  libraryAdvanceEveryMs?: number;
  /** Said as the load goes (the scenario's watch.step). */
  step?: (what: string) => void;
}

/** One event's delivery beyond the outage, for the report (the worst few). */
export interface LateDelivery {
  subscription: "push" | "code";
  key: string;
  position: number;
  /** delivery − append − unreachable time in between, ms */
  lateMs: number;
  /** the attempt the first delivery was (push only: the payload says it) */
  attempt?: number;
  /** when it was appended, ms after the load started */
  appendedAt: number;
}

export interface FaultFigures {
  events: number;
  push: ReturnType<typeof tally> & { deliveries: number };
  code: ReturnType<typeof tally> & { deliveries: number };
  /** The largest delay beyond the outage of any event's first delivery, either subscription, ms. */
  maxLateMs: number;
  /** The worst five, for the report. */
  worst: LateDelivery[];
  /** Events whose first delivery came later than `boundMs` (beyond the outage), per subscription. */
  late: (boundMs: number) => { push: number; code: number };
  appends: { http: number; library: number; acknowledged: number };
  /** HTTP answers and library errors seen on the way (status → count; 0 = no answer). */
  httpStatuses: Record<string, number>;
  /** The first ten answers other than 201, with their problem's detail. */
  httpProblems: string[];
  libraryErrors: Record<string, number>;
  /** Errors the library's advance, drain and consume threw, by code (database_unavailable is expected during a fault). */
  consumeErrors: Record<string, number>;
  outages: Outage[];
  unreachableMs: number;
  /** When appends began (Date.now()): `appendedAt` and fault times count from it. */
  startedAt: number;
  /** One key's deliveries, for a report: push (ms after the start, attempt, positions) and code. */
  history: (key: string) => string;
}

const count = (tallyOf: Record<string, number>, key: string) => (tallyOf[key] = (tallyOf[key] ?? 0) + 1);
const codeOf = (error: unknown) =>
  error instanceof CorqError ? error.code : error instanceof Error ? error.message.slice(0, 80) : String(error);

export async function runFaultLoad(options: FaultLoadOptions): Promise<FaultFigures> {
  const { random, api } = options;
  const step = options.step ?? (() => undefined);
  const receiver = await startReceiver(() => undefined);
  const codeDeliveries: { key: string; position: number; at: number }[] = [];
  const corq = createCorq({
    databaseUrl: options.databaseUrl,
    notify: true,
    poolSize: 4,
    subscriptions: [
      {
        name: "faults-code",
        events: [FAULT_EVENT],
        key: "stream",
        from: "beginning",
        batchSize: 10,
        leaseMs: options.leaseMs,
        maxAttempts: 1000,
        backoff: { initialMs: 20, maxMs: 200, factor: 2 },
        handle(events, ctx) {
          const at = Date.now();
          for (const e of events) codeDeliveries.push({ key: ctx.key, position: e.position, at });
        },
      },
    ],
  });
  const httpStatuses: Record<string, number> = {};
  const libraryErrors: Record<string, number> = {};
  const consumeErrors: Record<string, number> = {};
  const httpProblems: string[] = [];
  const call = async (method: string, path: string, body: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(`${api.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${api.adminToken}`, "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : null };
  };
  let over = false;
  let stopConsumers = false;
  const consumers: Promise<void>[] = [];
  try {
    step("setting up the subscriptions");
    await corq.migrate();
    await corq.advance(); // registers the code subscription
    const put = await call("PUT", "/subscriptions/faults-push", {
      events: [FAULT_EVENT],
      key: "stream",
      from: "beginning",
      batchSize: 10,
      maxAttempts: 1000,
      leaseMs: options.leaseMs,
      backoff: { initialMs: 20, maxMs: 200, factor: 2 },
      deliver: { url: receiver.url, timeoutMs: 5000 },
    });
    if (put.status !== 201) throw new Error(`PUT /subscriptions/faults-push answered ${put.status}`);

    // the library's own loops: an advancer (serve advances its own subscriptions, not this
    // process's code subscription; library appends kick it too), a drain (several keys per
    // claim) and a consume (one key at a time)
    const consumer = async (kind: "advance" | "drain" | "consume") => {
      while (!stopConsumers) {
        let worked = false;
        try {
          if (kind === "advance") await corq.advance({ coalesce: true });
          else
            worked =
              kind === "drain"
                ? (await corq.drain("faults-code", { budgetMs: 1000, keysPerClaim: 4 })).batches > 0
                : (await corq.consume("faults-code")) !== null;
        } catch (error) {
          count(consumeErrors, `${kind}: ${codeOf(error)}`);
        }
        if (!worked) await sleep(kind === "advance" ? (options.libraryAdvanceEveryMs ?? 100) : 20);
      }
    };
    consumers.push(consumer("advance"), consumer("drain"), consumer("consume"));
    const stopConsuming = () => {
      stopConsumers = true;
      return Promise.all(consumers);
    };

    step("appending while the faults go on");
    const started = Date.now();
    const streams = Array.from({ length: options.streams }, (_, i) => `faults-${i}`);
    const pick = () => streams[Math.floor(random() * streams.length)] ?? "faults-0";
    let httpAppends = 0;
    let libraryAppends = 0;
    // a writer appends one event every 1000/rate ms (at once when behind), retrying a failed
    // append with the same idempotency key until it is answered
    const writer = async (w: string, rate: number, append: (stream: string, seq: number) => Promise<boolean>) => {
      for (let seq = 0; !over; seq++) {
        const due = started + (seq * 1000) / rate;
        if (due > Date.now()) await sleep(due - Date.now());
        if (over) break;
        const stream = pick();
        for (let attempt = 0; !(await append(stream, seq)); attempt++)
          await sleep(Math.min(1000, 25 * 2 ** attempt) * (0.5 + random() / 2));
        if (w === "library") libraryAppends++;
        else httpAppends++;
      }
    };
    const httpWriter = (w: string) =>
      writer(w, options.httpRate / 3, async (stream, seq) => {
        const answer = await call(
          "POST",
          `/streams/${stream}/events`,
          { events: [{ name: FAULT_EVENT, data: { w, seq } }] },
          { "idempotency-key": `${w}-${seq}` },
        ).catch(() => ({ status: 0 }));
        count(httpStatuses, String(answer.status));
        if (answer.status !== 201 && httpProblems.length < 10) {
          const body = "body" in answer ? (answer.body as { detail?: string; title?: string } | null) : null;
          httpProblems.push(
            `${answer.status} at +${Date.now() - started} ms: ${body?.detail ?? body?.title ?? "no answer"}`,
          );
        }
        return answer.status === 201;
      });
    const libraryWriter = () =>
      writer("library", options.libraryRate, async (stream, seq) => {
        try {
          await corq.append(stream, [{ name: FAULT_EVENT, data: { w: "library", seq } }], {
            idempotencyKey: `library-${seq}`,
          });
          return true;
        } catch (error) {
          count(libraryErrors, codeOf(error));
          return false;
        }
      });
    const writers = [httpWriter("http-a"), httpWriter("http-b"), httpWriter("http-c"), libraryWriter()];
    const overAt = started + options.durationMs;
    const faulting = options.faults(() => over || Date.now() >= overAt);
    await sleep(options.durationMs);
    over = true;
    const outages = await faulting;
    await Promise.all(writers);

    step("waiting for every event to be delivered");
    const raw = new pg.Pool({ connectionString: options.databaseUrl, max: 1 });
    raw.on("error", () => undefined);
    let truth: { stream: string; position: number; created: number }[] = [];
    try {
      const read = async () => {
        for (let attempt = 0; ; attempt++) {
          try {
            const { rows } = await raw.query(
              "SELECT stream, position::int, created_at FROM corq.events WHERE name = $1 ORDER BY tx, position",
              [FAULT_EVENT],
            );
            return rows.map((r) => ({ stream: r.stream, position: r.position, created: +r.created_at }));
          } catch (error) {
            if (attempt > 50) throw error;
            await sleep(200);
          }
        }
      };
      truth = await read();
    } finally {
      await raw.end();
    }
    const expected = new Map<string, number[]>();
    for (const e of truth) expected.set(e.stream, [...(expected.get(e.stream) ?? []), e.position]);
    const pushed = () =>
      receiver.deliveries
        .filter((d) => d.subscription === "faults-push")
        .flatMap((d) =>
          d.events.map((e) => ({ key: d.key, position: e.position, at: d.receivedAt, attempt: d.attempt })),
        );
    const settleUntil = Date.now() + options.settleMs;
    while (Date.now() < settleUntil) {
      if (tally(expected, pushed()).lost === 0 && tally(expected, codeDeliveries).lost === 0) break;
      await sleep(100);
    }
    await stopConsuming();

    // how late each event's first delivery came, beyond the outage in between
    const unreachable = (from: number, to: number) =>
      outages.reduce((sum, o) => sum + Math.max(0, Math.min(to, o.to) - Math.max(from, o.from)), 0);
    const createdAt = new Map(truth.map((e) => [e.position, e.created]));
    const lateness = (
      subscription: "push" | "code",
      deliveries: { key: string; position: number; at: number; attempt?: number }[],
    ) => {
      const first = new Map<number, LateDelivery>();
      for (const d of deliveries) {
        const created = createdAt.get(d.position);
        if (created === undefined || first.has(d.position)) continue;
        const lateMs = d.at - created - unreachable(created, d.at);
        first.set(d.position, {
          subscription,
          key: d.key,
          position: d.position,
          lateMs,
          attempt: d.attempt,
          appendedAt: created - started,
        });
      }
      return [...first.values()];
    };
    const push = pushed();
    const lates = [...lateness("push", push), ...lateness("code", codeDeliveries)].sort((a, b) => b.lateMs - a.lateMs);
    return {
      events: truth.length,
      push: { ...tally(expected, push), deliveries: push.length },
      code: { ...tally(expected, codeDeliveries), deliveries: codeDeliveries.length },
      maxLateMs: lates[0]?.lateMs ?? 0,
      worst: lates.slice(0, 5),
      late: (boundMs) => ({
        push: lates.filter((l) => l.subscription === "push" && l.lateMs > boundMs).length,
        code: lates.filter((l) => l.subscription === "code" && l.lateMs > boundMs).length,
      }),
      appends: { http: httpAppends, library: libraryAppends, acknowledged: httpAppends + libraryAppends },
      httpStatuses,
      httpProblems,
      libraryErrors,
      consumeErrors,
      outages,
      unreachableMs: outages.reduce((sum, o) => sum + o.to - o.from, 0),
      startedAt: started,
      history: (key) =>
        `push: ${receiver.deliveries
          .filter((d) => d.subscription === "faults-push" && d.key === key)
          .map((d) => `+${d.receivedAt - started} attempt ${d.attempt} [${d.events.map((e) => e.position).join(",")}]`)
          .join(" | ")}; code: ${codeDeliveries
          .filter((d) => d.key === key)
          .map((d) => `+${d.at - started} ${d.position}`)
          .join(" ")}`,
    };
  } finally {
    over = true;
    stopConsumers = true;
    await Promise.allSettled(consumers);
    await corq.close().catch(() => undefined);
    await receiver.close();
  }
}

/**
 * Terminates every backend of `databaseName` (but its own, on the server's `postgres` database)
 * every `minMs`–`maxMs` (drawn from `random`) until `over()`. Returns no outage (the database
 * stays reachable) and counts the rounds and the backends ended in `counts`.
 */
export function terminateBackends(options: {
  serverUrl: string;
  databaseName: string;
  random: () => number;
  minMs: number;
  maxMs: number;
  counts: { rounds: number; backends: number; at: number[] };
}) {
  return async (over: () => boolean): Promise<Outage[]> => {
    const killer = new pg.Client({ connectionString: options.serverUrl });
    killer.on("error", () => undefined);
    await killer.connect();
    try {
      for (;;) {
        const wait = options.minMs + options.random() * (options.maxMs - options.minMs);
        const until = Date.now() + wait;
        while (!over() && Date.now() < until) await sleep(Math.min(50, until - Date.now()));
        if (over()) return [];
        const { rows } = await killer.query(
          `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS ended FROM pg_stat_activity
            WHERE datname = $1 AND pid <> pg_backend_pid()`,
          [options.databaseName],
        );
        options.counts.rounds++;
        options.counts.at.push(Date.now());
        options.counts.backends += rows[0].ended;
      }
    } finally {
      await killer.end().catch(() => undefined);
    }
  };
}
