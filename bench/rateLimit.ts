// Rate limits on Node (issue 32's target): `{ events: 100, perMs: 1000, by: "tenant" }` on a
// subscription drained by one serve process with 4 consumers (role "worker": the advancer and
// the consumers, woken at the next due key). Two heavy tenants hold a backlog far over their
// limit for the whole run; a light tenant appends under its limit. Measured: each heavy
// tenant's delivered rate over the run (the target: within ±10% of 100/s), and the light
// tenant's append→handler latency beside the same light traffic with no limit and no heavy
// tenants (keys under their limit keep their latency).
import { loadavg } from "node:os";
import { createCorq, type Corq } from "../src/index.js";
import { startServe } from "../src/node/serve.js";
import { percentile } from "./stats.js";

export interface RateLimitRun {
  seconds: number;
  /** events per second of each heavy tenant, over the run (from the first delivery to the run's end) */
  heavyRates: number[];
  /** the light tenant's append→handler latency, with the heavy tenants and the limit */
  lightP50Ms: number;
  lightP99Ms: number;
  /** the same light traffic alone, without a limit */
  aloneP50Ms: number;
  aloneP99Ms: number;
  load: { start: number; end: number };
}

const LIMIT = { events: 100, perMs: 1000, by: "tenant" as const };

/** One serve process with the subscription; `limited` or not; returns a stop function and what it saw. */
async function serving(databaseUrl: string, limited: boolean) {
  const seen: { tenant: string; at: number; sentAt: number }[] = [];
  const serve = await startServe({
    subscriptions: [
      {
        name: "limited",
        key: "stream",
        tenant: "data.tenant",
        batchSize: 10,
        rateLimit: limited ? LIMIT : null,
        handle: (batch) => {
          const at = Date.now();
          for (const e of batch) {
            const data = e.data as { tenant: string; sentAt: number };
            seen.push({ tenant: data.tenant, at, sentAt: data.sentAt });
          }
        },
      },
    ],
    env: { DATABASE_URL: databaseUrl, CORQ_CONCURRENCY: "4" },
    role: "worker",
    log: () => undefined,
  });
  return { seen, stop: () => serve.stop() };
}

/** The light tenant: `perSecond` single-event appends a second over its own keys, for `seconds`. */
async function lightTraffic(producer: Pick<Corq, "append">, seconds: number, perSecond: number) {
  const end = Date.now() + seconds * 1000;
  for (let i = 0; Date.now() < end; i++) {
    const next = Date.now() + 1000 / perSecond;
    await producer.append(`light-${i % 50}`, [{ name: "Job", data: { tenant: "light", sentAt: Date.now() } }]);
    await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now())));
  }
}

const latencies = (seen: { tenant: string; at: number; sentAt: number }[]) =>
  seen
    .filter((s) => s.tenant === "light")
    .map((s) => s.at - s.sentAt)
    .sort((a, b) => a - b);

/** `aloneUrl` and `url`: two fresh databases, for the baseline and the run. */
export async function rateLimitRun(
  aloneUrl: string,
  url: string,
  { seconds, heavyEvents }: { seconds: number; heavyEvents: number },
): Promise<RateLimitRun> {
  const loadStart = loadavg()[0] ?? 0;
  // the light traffic alone, without a limit: its baseline latency
  const alone = await serving(aloneUrl, false);
  const aloneProducer = createCorq({ databaseUrl: aloneUrl, poolSize: 2, notify: true });
  try {
    await lightTraffic(aloneProducer, Math.min(20, seconds), 20);
    await new Promise((r) => setTimeout(r, 1000));
  } finally {
    await aloneProducer.close();
    await alone.stop();
  }
  const aloneLatency = latencies(alone.seen);

  const producer = createCorq({ databaseUrl: url, poolSize: 8, notify: true });
  await producer.migrate();
  // the heavy tenants' backlog first (no consumer yet): 200 keys each
  for (const tenant of ["heavy-a", "heavy-b"])
    for (let k = 0; k < 200; k++)
      await producer.append(
        `${tenant}-${k}`,
        Array.from({ length: Math.ceil(heavyEvents / 200) }, () => ({ name: "Job", data: { tenant, sentAt: 0 } })),
      );
  const limited = await serving(url, true);
  try {
    const begun = Date.now();
    await lightTraffic(producer, seconds, 20);
    const ended = Date.now();
    const heavyRates = ["heavy-a", "heavy-b"].map((tenant) => {
      const times = limited.seen.filter((s) => s.tenant === tenant && s.at <= ended).map((s) => s.at);
      const first = Math.min(...times, begun);
      return times.length / ((ended - first) / 1000);
    });
    const light = latencies(limited.seen);
    return {
      seconds,
      heavyRates,
      lightP50Ms: percentile(light, 50),
      lightP99Ms: percentile(light, 99),
      aloneP50Ms: percentile(aloneLatency, 50),
      aloneP99Ms: percentile(aloneLatency, 99),
      load: { start: loadStart, end: loadavg()[0] ?? 0 },
    };
  } finally {
    await producer.close();
    await limited.stop();
  }
}
