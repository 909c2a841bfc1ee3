// Cells under traffic (issue "Past one Postgres", tests and targets): concurrent producers over
// 200 tenants and three cells, two subscriptions (key = stream; key = a JSON path within the
// tenant), each cell advanced and drained by its own loop (as a serve process or a cron per cell
// would) — every event delivered once per subscription, per-key order kept, none lost; the same
// while a slot with live traffic moves twice, and while one cell is stopped for 10 s (its tenants
// wait, the others do not). And a transaction holding cell one's horizon does not slow the
// deliveries of cells two and three.
import { describe, expect, it } from "vitest";
import pg from "pg";
import { createCells, type Cells, type DeliveredEvent } from "../../src/index.js";
import { slotOf } from "../../src/cells/slots.js";
import { seededRandom } from "../helpers/chaos.js";
import { useThreeCells } from "../helpers/cells.js";
import { until } from "../helpers/until.js";

const three = useThreeCells();

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const TENANTS = Array.from({ length: 200 }, (_, i) => `t${i}`);

interface Delivery {
  subscription: string;
  key: string;
  stream: string;
  version: number;
  at: number;
}

function deployment(urls: Record<string, string>) {
  const deliveries: Delivery[] = [];
  const appendedAt = new Map<string, number>();
  const handle = (subscription: string) => async (events: DeliveredEvent[], ctx: { key: string }) => {
    const at = Date.now();
    for (const e of events) deliveries.push({ subscription, key: ctx.key, stream: e.stream, version: e.version, at });
  };
  const cells = createCells({
    cells: urls,
    subscriptions: [
      { name: "byStream", key: "stream", handle: handle("byStream") },
      // the order id names its tenant ("t7-o1"): a key within the tenant
      { name: "byOrder", key: "data.order", handle: handle("byOrder") },
    ],
    moveWaitMs: 15_000,
  });
  let stopped = false;
  const errors: Record<string, number> = {};
  // each cell on its own loop, as a serve process (or a Worker's cron) per cell would drive it
  const loop = async (name: string) => {
    const cell = cells.cell(name);
    while (!stopped) {
      try {
        await cell.advance();
        const done = await Promise.all(["byStream", "byOrder"].map((s) => cell.drain(s, { keysPerClaim: 16 })));
        if (done.every((d) => d.batches === 0)) await sleep(10);
      } catch (error) {
        errors[name] = (errors[name] ?? 0) + 1;
        if (process.env.CORQ_CELLS_DEBUG) console.warn(name, String(error));
        await sleep(200);
      }
    }
  };
  let loops: Promise<void>[] = [];
  return {
    cells,
    deliveries,
    appendedAt,
    errors,
    /** Migrates, then starts the loops. */
    async start() {
      await cells.migrate();
      loops = cells.names.map(loop);
    },
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

/** Producers: each appends to random tenants' streams; what was acknowledged, by stream, in version order. */
function produce(
  cells: Cells,
  seed: number,
  producers: number,
  tenants: () => string[],
  appendedAt: Map<string, number>,
) {
  const random = seededRandom(seed);
  const acked = new Map<string, number[]>();
  const refused: Record<string, number> = {};
  let stopped = false;
  const loops = Array.from({ length: producers }, async () => {
    while (!stopped) {
      const pool = tenants();
      const tenant = pool[Math.floor(random() * pool.length)] ?? "t0";
      const stream = `${tenant}:s${Math.floor(random() * 3)}`;
      const order = `${tenant}-o${Math.floor(random() * 2)}`;
      const sentAt = Date.now();
      try {
        const { version } = await cells.append(stream, [{ name: "Step", data: { order } }]);
        acked.set(stream, [...(acked.get(stream) ?? []), version]);
        appendedAt.set(`${stream}@${version}`, sentAt);
      } catch (error) {
        const code = (error as { code?: string }).code ?? "other";
        refused[code] = (refused[code] ?? 0) + 1;
        await sleep(50);
      }
    }
  });
  return {
    acked,
    refused,
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

/** Delivered once per subscription, per-key order kept, none lost. */
function checkDeliveries(deliveries: Delivery[], acked: Map<string, number[]>) {
  for (const subscription of ["byStream", "byOrder"]) {
    const mine = deliveries.filter((d) => d.subscription === subscription);
    const seen = new Map<string, number>();
    for (const d of mine) seen.set(`${d.stream}@${d.version}`, (seen.get(`${d.stream}@${d.version}`) ?? 0) + 1);
    const twice = [...seen].filter(([, n]) => n > 1);
    expect(twice, `${subscription}: delivered more than once`).toEqual([]);
    const lost = [...acked].flatMap(([stream, versions]) => versions.filter((v) => !seen.has(`${stream}@${v}`)));
    expect(lost, `${subscription}: acknowledged appends never delivered`).toEqual([]);
    // per key, each stream's versions come in order
    const lastByKeyStream = new Map<string, number>();
    const outOfOrder: string[] = [];
    for (const d of mine) {
      const at = `${d.key}|${d.stream}`;
      if ((lastByKeyStream.get(at) ?? -1) >= d.version) outOfOrder.push(`${at}@${d.version}`);
      lastByKeyStream.set(at, d.version);
    }
    expect(outOfOrder, `${subscription}: out of order within a key`).toEqual([]);
  }
}

async function settle(run: ReturnType<typeof deployment>, acked: Map<string, number[]>) {
  const total = [...acked.values()].reduce((n, v) => n + v.length, 0);
  await until(
    () => new Set(run.deliveries.map((d) => `${d.subscription}|${d.stream}@${d.version}`)).size >= 2 * total,
    { timeoutMs: 30_000, everyMs: 100, message: `${2 * total} deliveries` },
  );
  await sleep(300); // anything delivered twice comes now
}

describe("cells under traffic", () => {
  it("moves a slot with live traffic twice and survives a cell stopped for 10 s: once, in order, none lost", async () => {
    const urls = await three.databases();
    const run = deployment(urls);
    const { cells } = run;
    try {
      await run.start();
      const placeOf = async (tenant: string) => (await cells.place(`${tenant}:s0`)).cell;
      const homes = new Map(await Promise.all(TENANTS.map(async (t) => [t, await placeOf(t)] as const)));
      const hot = "t7";
      // clients of their own per cell's tenants: a client waiting on a stopped cell waits alone
      const inThree = TENANTS.filter((t) => homes.get(t) === "three" && slotOf(t, 1024) !== slotOf(hot, 1024));
      const elsewhere = TENANTS.filter((t) => homes.get(t) !== "three" && slotOf(t, 1024) !== slotOf(hot, 1024));
      const producers = [
        produce(cells, 50, 6, () => elsewhere, run.appendedAt),
        produce(cells, 52, 2, () => inThree, run.appendedAt),
      ];
      await sleep(2000);

      // a busy tenant's slot moves twice while every producer goes on
      const first = homes.get(hot);
      const [second, third] = cells.names.filter((n) => n !== first);
      const hotProducers = produce(cells, 51, 2, () => [hot], run.appendedAt);
      producers.push(hotProducers);
      await sleep(500);
      const movedAt = Date.now();
      expect(await cells.move({ tenant: hot }, { to: second! })).toMatchObject({ done: true });
      const firstMoveMs = Date.now() - movedAt;
      await sleep(500);
      expect(await cells.move({ tenant: hot }, { to: third! })).toMatchObject({ done: true });
      const movesMs = [firstMoveMs, Date.now() - movedAt - firstMoveMs - 500];
      expect(await placeOf(hot)).toBe(third);
      await sleep(500);
      await hotProducers.stop();

      // cell "three" stopped for 10 s: its tenants wait, the others' appends and deliveries go on
      const stopAt = Date.now();
      const restart = three.clusters.three.restart({ mode: "fast", downMs: 10_000 });
      await sleep(6000);
      const ofOthers = (d: Delivery) => d.at > stopAt + 1000 && elsewhere.includes(d.stream.split(":")[0] ?? "");
      const duringOthers = run.deliveries.filter(ofOthers).length;
      const duringThree = run.deliveries.filter(
        (d) => d.at > stopAt + 1000 && inThree.includes(d.stream.split(":")[0] ?? ""),
      ).length;
      await restart;
      await sleep(2000);
      for (const p of producers) await p.stop();
      const acked = new Map(producers.flatMap((p) => [...p.acked]));
      await settle(run, acked);

      // the other cells delivered while three was down (from a second after it stopped, for 5 s)
      expect(duringOthers).toBeGreaterThan(100);
      expect(duringThree).toBe(0);
      expect(producers[1]!.refused.database_unavailable ?? 0).toBeGreaterThan(0);
      checkDeliveries(run.deliveries, acked);
      // the hot tenant's events: all in its last cell now, none left behind
      const hotStreams = [...hotProducers.acked.keys()];
      for (const name of cells.names.filter((n) => n !== third))
        for (const stream of hotStreams) expect(await cells.cell(name).readStream(stream)).toEqual([]);
      for (const stream of hotStreams) {
        const versions = (await cells.readStream(stream)).map((e) => e.version);
        expect(versions).toEqual(versions.map((_, i) => i));
      }
      console.info(
        `cells traffic: moves took ${movesMs.join(", ")} ms (${hotProducers.acked.size} streams); ${run.deliveries.length} deliveries, ${duringOthers} by cells one and two while three was down, refused appends ${JSON.stringify(producers.map((p) => p.refused))}, loop errors ${JSON.stringify(run.errors)}`,
      );
    } finally {
      await run.stop();
      await cells.close();
    }
  }, 120_000);

  it("a transaction holding cell one's horizon does not slow cells two and three (p50 within 2x)", async () => {
    const urls = await three.databases();
    const run = deployment(urls);
    const { cells } = run;
    const holder = new pg.Client({ connectionString: urls.one });
    try {
      await run.start();
      const homes = new Map(
        await Promise.all(TENANTS.map(async (t) => [t, (await cells.place(`${t}:s0`)).cell] as const)),
      );
      const others = TENANTS.filter((t) => homes.get(t) !== "one");
      const p50 = async (seed: number) => {
        const from = run.deliveries.length;
        const producers = produce(cells, seed, 4, () => others, run.appendedAt);
        await sleep(3000);
        await producers.stop();
        await settle(run, producers.acked);
        const latencies = run.deliveries
          .slice(from)
          .filter((d) => d.subscription === "byStream")
          .map((d) => d.at - (run.appendedAt.get(`${d.stream}@${d.version}`) ?? d.at))
          .sort((a, b) => a - b);
        return latencies[Math.floor(latencies.length / 2)] ?? 0;
      };
      const usual = await p50(60);
      await holder.connect();
      await holder.query("BEGIN");
      await holder.query("SELECT pg_current_xact_id()");
      // cell one's own tenants wait (their events sit above its horizon)
      const oneTenant = TENANTS.find((t) => homes.get(t) === "one")!;
      await cells.append(`${oneTenant}:s0`, [{ name: "Step", data: { order: `${oneTenant}-o0` } }]);
      const held = await p50(61);
      const stuck = run.deliveries.filter((d) => d.stream === `${oneTenant}:s0`);
      expect(stuck).toEqual([]);
      await holder.query("ROLLBACK");
      console.info(`cells horizon: p50 ${usual} ms usual, ${held} ms with cell one's horizon held`);
      expect(held).toBeLessThanOrEqual(Math.max(2 * usual, usual + 20));
    } finally {
      await holder.end().catch(() => undefined);
      await run.stop();
      await cells.close();
    }
  }, 90_000);
});
