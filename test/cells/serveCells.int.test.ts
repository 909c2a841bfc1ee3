// `npm run serve` over cells (CORQ_CELLS): one process on three clusters (test/helpers/cells.ts).
// Appends over HTTP land in their tenant's cell, a push subscription receives every event once
// from every cell, GET /stats and /metrics cover every cell, and a cell whose cluster is down
// answers its tenants' appends with 503 while the other cells take appends and deliver.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import pg from "pg";
import { createCells, type Cells } from "../../src/index.js";
import { startThreeCells, type CellUrls, type ThreeCells } from "../helpers/cells.js";
import { startReceiver, type Receiver } from "../helpers/receiver.js";
import { startServeProcess, type ServeProcess } from "../helpers/serveProcess.js";
import { eventually } from "../helpers/until.js";

const TOKEN = "serve-cells-admin-token-0123456789abcdef";
let three: ThreeCells;
let urls: CellUrls;
let cells: Cells;
let serve: ServeProcess;
let receiver: Receiver;
let secret: string | undefined;
// two tenants per cell, found through the directory
const tenantsOf: Record<string, string[]> = { one: [], two: [], three: [] };

beforeAll(async () => {
  three = await startThreeCells(inject("postgresUrl"));
  urls = await three.databases();
  cells = createCells({ cells: urls });
  await cells.migrate();
  for (let i = 0; Object.values(tenantsOf).some((list) => list.length < 2); i++) {
    const { cell, tenant } = await cells.place(`t${i}:probe`);
    if ((tenantsOf[cell]?.length ?? 2) < 2) tenantsOf[cell]?.push(tenant);
  }
  receiver = await startReceiver(() => secret);
  serve = await startServeProcess({
    // the home cell's: the helper always sets one, and CORQ_CELLS wins over it
    databaseUrl: urls.one,
    env: {
      CORQ_CELLS: Object.entries(urls)
        .map(([name, url]) => `${name}=${url}`)
        .join(" "),
      CORQ_ADMIN_TOKEN: TOKEN,
      CORQ_PUSH_ALLOW_PRIVATE: "true",
      CORQ_SAFETY_NET_MS: "1000",
    },
  });
}, 120_000);

afterAll(async () => {
  if (serve) expect(await serve.stop()).toBe(0);
  await receiver?.close();
  await cells?.close();
  await three?.close();
});

const api = (method: string, path: string, body?: unknown) =>
  fetch(`${serve.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
const append = (stream: string, count: number) =>
  api("POST", `/streams/${encodeURIComponent(stream)}/events`, {
    events: Array.from({ length: count }, (_, i) => ({ name: "Made", data: { i } })),
  });
/** The (stream, version) pairs delivered, each as often as it was. */
const delivered = () => receiver.deliveries.flatMap((d) => d.events.map((e) => `${e.stream}@${e.version}`)).sort();

describe("serve over cells (CORQ_CELLS)", () => {
  it("routes appends to their tenant's cell, delivers every event once, and sums the cells in /stats and /metrics", async () => {
    const put = await api("PUT", "/subscriptions/hooked", { events: ["*"], deliver: { url: receiver.url } });
    expect(put.status).toBe(201);
    secret = ((await put.json()) as { secret: string }).secret;

    // a different number of events per cell: a sum that misses or doubles a cell shows
    const perCell = { one: 1, two: 2, three: 3 } as const;
    const expected: string[] = [];
    for (const [cell, count] of Object.entries(perCell))
      for (const tenant of tenantsOf[cell] ?? []) {
        const response = await append(`${tenant}:order`, count);
        expect(response.status).toBe(201);
        expect(((await response.json()) as { cell: string }).cell).toBe(cell);
        for (let v = 0; v < count; v++) expected.push(`${tenant}:order@${v}`);
      }
    for (const [cell, tenants] of Object.entries(tenantsOf))
      for (const tenant of tenants)
        for (const name of cells.names) {
          const events = await cells.cell(name).readStream(`${tenant}:order`);
          expect(events.length, `${tenant} in cell ${name}`).toBe(
            name === cell ? perCell[cell as keyof typeof perCell] : 0,
          );
        }

    await eventually(async () => expect(delivered()).toEqual(expected.sort()), { timeoutMs: 15_000 });
    expect(receiver.deliveries.every((d) => d.signatureValid)).toBe(true);

    const readStats = async () =>
      (await (await api("GET", "/stats")).json()) as {
        subscriptions: { name: string; pending: number; keys: { ready: number } }[];
        log: { events: number };
        cells: Record<string, { log: { events: number } }>;
      };
    const stats = await readStats();
    expect(stats.log.events).toBe(2 * (1 + 2 + 3));
    for (const name of cells.names)
      expect(stats.cells[name]?.log.events).toBe((await cells.cell(name).stats()).log.events);
    // a push is acked after the receiver answered: the last acks may land a moment after the deliveries
    await eventually(async () =>
      expect((await readStats()).subscriptions.find((s) => s.name === "hooked")?.pending).toBe(0),
    );

    const metrics = await (await api("GET", "/metrics")).text();
    for (const [cell, count] of Object.entries(perCell))
      expect(metrics).toContain(`corq_events_appended_total{cell="${cell}"} ${2 * count}`);
    expect(metrics.match(/^# TYPE corq_events_appended_total /gm)?.length).toBe(1);
  });

  it("a cell that is down answers its tenants' appends with 503; the other cells append and deliver", async () => {
    const [upOne, upTwo, down] = [tenantsOf.one?.[0], tenantsOf.two?.[0], tenantsOf.three?.[0]];
    let back = false;
    const restarting = three.clusters.three.restart({ mode: "fast", downMs: 5000 }).then(() => (back = true));
    // down once a connection to it is refused
    await eventually(
      async () => {
        const client = new pg.Client({ connectionString: urls.three });
        const refused = await client.connect().then(
          () => false,
          () => true,
        );
        await client.end().catch(() => undefined);
        if (!refused) throw new Error("cell three still answers");
      },
      { timeoutMs: 5000, intervalMs: 20 },
    );
    const refusedAppend = append(`${down}:later`, 1);
    for (const tenant of [upOne, upTwo]) expect((await append(`${tenant}:during`, 1)).status).toBe(201);
    await eventually(
      async () => {
        expect(delivered()).toContain(`${upOne}:during@0`);
        expect(delivered()).toContain(`${upTwo}:during@0`);
      },
      { timeoutMs: 4000 },
    );
    // delivered while cell three was still down
    expect(back).toBe(false);
    const stats = (await (await api("GET", "/stats")).json()) as { cells: Record<string, { error?: string }> };
    expect(stats.cells.three?.error).toBeDefined();
    expect(stats.cells.one?.error).toBeUndefined();

    const refused = await refusedAppend;
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as { type: string }).type).toBe("urn:corq:problem:database_unavailable");

    await restarting;
    // back: its tenants append and deliver again
    await eventually(async () => expect((await append(`${down}:after`, 1)).status).toBe(201), { timeoutMs: 10_000 });
    await eventually(async () => expect(delivered()).toContain(`${down}:after@0`), { timeoutMs: 10_000 });
  });

  it("pages keys across cells in key order, answers doctor for every cell, and refuses one position for all cells with a 400", async () => {
    const inCells = (
      await Promise.all(cells.names.map((name) => cells.cell(name).keys("hooked", { limit: 1000 })))
    ).flatMap((keys) => keys.map((k) => k.key));
    const paged: string[] = [];
    for (let after: string | null = "", pages = 0; after !== null && pages < 20; pages++) {
      const query = after === "" ? "limit=2" : `limit=2&after=${encodeURIComponent(after)}`;
      const page = (await (await api("GET", `/subscriptions/hooked/keys?${query}`)).json()) as {
        keys: { key: string }[];
        next: string | null;
      };
      paged.push(...page.keys.map((k) => k.key));
      after = page.next;
    }
    expect(inCells.length).toBeGreaterThan(6);
    expect(paged).toEqual([...inCells].sort());

    const doctor = (await (await api("GET", "/doctor")).json()) as { ok: boolean; findings: { message: string }[] };
    expect(typeof doctor.ok).toBe("boolean");
    expect(doctor.findings.every((f) => /^cell "(one|two|three)": /.test(f.message))).toBe(true);

    for (const [method, path, body] of [
      ["GET", "/events?after=1", undefined],
      ["POST", "/subscriptions/hooked/rewind", { to: 1 }],
      ["POST", "/dispatch", undefined],
    ] as const) {
      const response = await api(method, path, body);
      expect(response.status, `${method} ${path}`).toBe(400);
      expect(((await response.json()) as { detail: string }).detail).toMatch(/cell/);
    }
    const rewound = await api("POST", "/subscriptions/hooked/rewind", { to: "beginning" });
    expect(((await rewound.json()) as { requeued: number }).requeued).toBe(
      (await Promise.all(cells.names.map((name) => cells.cell(name).stats()))).reduce((n, s) => n + s.log.events, 0),
    );
  });
});
