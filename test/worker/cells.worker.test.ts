// The Worker over cells (CORQ_CELLS): one Worker on three clusters (test/helpers/cells.ts), each
// reached through Neon's driver and a local stand-in of its own (an HTTP SQL endpoint and a
// WebSocket proxy per server, CORQ_NEON_HTTP_ENDPOINTS / CORQ_NEON_WS_PROXIES). An append's kick
// dispatches its stream's cell only; the cron dispatches every cell, each on its own consumer
// slots, its consumers (started through SELF with `corq-cell`) draining their own cell; a
// `corq-cell` that names no cell is a 400.
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHttpSqlEndpoint } from "../../cli/dev/httpSqlEndpoint.js";
import { startLocalStack, type LocalStack } from "../../cli/dev/localStack.js";
import { startWsProxy } from "../../cli/dev/wsProxy.js";
import { subscriptions } from "../../functions/app.js";
import { createCells, type Cells } from "../../src/index.js";
import { useThreeCells, type CellUrls } from "../helpers/cells.js";
import { useReceiver } from "../helpers/receiver.js";
import { eventually } from "../helpers/until.js";

const three = useThreeCells();
const hook = useReceiver();
let urls: CellUrls;
let cells: Cells;
let stack: LocalStack;
const stops: (() => Promise<unknown>)[] = [];
// three tenants per cell, found through the directory
const tenantsOf: Record<string, string[]> = { one: [], two: [], three: [] };

beforeAll(async () => {
  urls = await three.databases();
  // the Worker's code subscriptions registered in every cell, as `corq cells migrate` does
  cells = createCells({ cells: urls, subscriptions });
  await cells.migrate();
  for (let i = 0; Object.values(tenantsOf).some((list) => list.length < 3); i++) {
    const { cell, tenant } = await cells.place(`t${i}:probe`);
    if ((tenantsOf[cell]?.length ?? 3) < 3) tenantsOf[cell]?.push(tenant);
  }
  // the stack's own stand-ins serve cell one (its DATABASE_URL, which CORQ_CELLS overrides); two and three get theirs
  const endpoints: string[] = [];
  const proxies: string[] = [];
  for (const url of [urls.two, urls.three]) {
    const { hostname, port } = new URL(url);
    const target = { host: hostname, port: Number(port || 5432) };
    const http = await startHttpSqlEndpoint({ target, poolSize: 8 });
    const proxy = await startWsProxy(target);
    stops.push(http.close, proxy.close);
    endpoints.push(`${hostname}:${target.port}=${http.url}`);
    proxies.push(`${hostname}:${target.port}=${proxy.address}`);
  }
  stack = await startLocalStack({
    databaseUrl: urls.one,
    // no wake-up object: only the kicks and the cron below dispatch
    config: fileURLToPath(new URL("./fixtures/noWakeUps.toml", import.meta.url)),
    vars: {
      CORQ_LOCAL: "true",
      CORQ_CELLS: Object.entries(urls)
        .map(([name, url]) => `${name}=${url}`)
        .join(" "),
      CORQ_NEON_HTTP_ENDPOINTS: endpoints.join(" "),
      CORQ_NEON_WS_PROXIES: proxies.join(" "),
      CORQ_PUSH_ALLOW_PRIVATE: "true",
      // one key per consumer and two slots per cell: a cell's dispatch starts consumers through
      // SELF; the few subrequests an invocation may spend (shared by the cron's three cells) leave
      // most batches to consumers handed on through SELF, which must consume from their own cell
      CORQ_CONCURRENCY: "2",
      CORQ_KEYS_PER_CLAIM: "1",
      CORQ_MAX_SUBREQUESTS: "20",
      CORQ_CONSUMER_BUDGET_MS: "2000",
    },
  });
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  for (const stop of stops) await stop().catch(() => undefined);
  await cells?.close();
});

const api = async (method: string, path: string, init: { body?: unknown; headers?: Record<string, string> } = {}) => {
  const response = await fetch(`${stack.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${stack.adminToken}`, "content-type": "application/json", ...init.headers },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await response.text();
  return {
    status: response.status,
    type: response.headers.get("content-type") ?? "",
    json: text ? JSON.parse(text) : null,
  };
};

/** The events delivered: "<stream>#<id>" per event, repeats included. */
const delivered = () =>
  hook.receiver.deliveries
    .filter((d) => d.subscription === "hooks")
    .flatMap((d) => d.events.map((e) => `${d.key}#${(e.data as { id: number }).id}`));

/** Events appended through the library: routed to their tenant's cell, no kick. */
async function appendQuietly(cell: string, id: number, count: number): Promise<string[]> {
  const appended: string[] = [];
  for (const [n, tenant] of (tenantsOf[cell] ?? []).entries())
    for (let i = 0; i < count; i++) {
      const stream = `${tenant}:quiet-${id}-${n}-${i}`;
      await cells.append(stream, [{ name: "Ping", data: { id } }]);
      appended.push(`${stream}#${id}`);
    }
  return appended;
}

describe("the Worker over cells", () => {
  it("a push subscription is in every cell; an append's kick dispatches its stream's cell only", async () => {
    const created = await api("PUT", "/subscriptions/hooks", {
      body: { events: ["Ping"], batchSize: 1, deliver: { url: hook.receiver.url } },
    });
    expect(created.status).toBe(201);
    hook.secret = created.json.secret;
    // waiting in cells one and three (no kick)
    const waiting = [...(await appendQuietly("one", 1, 1)), ...(await appendQuietly("three", 1, 1))];
    // over HTTP, in cell two: its kick delivers it
    const stream = `${tenantsOf.two?.[0]}:kicked`;
    const appended = await api("POST", `/streams/${encodeURIComponent(stream)}/events`, {
      body: { events: [{ name: "Ping", data: { id: 2 } }] },
    });
    expect(appended.status).toBe(201);
    expect(appended.json.cell).toBe("two");
    await eventually(async () => expect(delivered()).toContain(`${stream}#2`), { timeoutMs: 15_000 });
    // the kick's consumers looked again in their own cell only: the others' events still wait for the cron
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(delivered().filter((event) => waiting.includes(event))).toEqual([]);
    await stack.runCron();
    await eventually(async () =>
      expect(
        delivered()
          .filter((event) => waiting.includes(event))
          .sort(),
      ).toEqual(waiting.sort()),
    );
  });

  it("the cron dispatches every cell: its consumers drain their own cell, every event delivered once", async () => {
    hook.receiver.reset();
    const appended: string[] = [];
    // over HTTP (each kicks its own cell) and through the library (only the cron delivers them)
    for (const [cell, tenants] of Object.entries(tenantsOf)) {
      for (const [n, tenant] of tenants.entries()) {
        const stream = `${tenant}:http-${n}`;
        const response = await api("POST", `/streams/${encodeURIComponent(stream)}/events`, {
          body: { events: [{ name: "Ping", data: { id: 3 } }] },
        });
        expect(response.status).toBe(201);
        expect(response.json.cell).toBe(cell);
        appended.push(`${stream}#3`);
      }
      appended.push(...(await appendQuietly(cell, 4, 3)));
    }
    await stack.runCron();
    await eventually(async () => expect([...new Set(delivered())].sort()).toEqual([...appended].sort()), {
      timeoutMs: 30_000,
    });
    // once each
    expect(delivered().length).toBe(appended.length);
    // every cell's queue empty, and its consumer slots free again
    await eventually(async () => {
      for (const name of cells.names) {
        const stats = await cells.cell(name).stats();
        const hooks = stats.subscriptions.find((s) => s.name === "hooks");
        expect({ cell: name, pending: hooks?.pending, lag: hooks?.lag }).toEqual({ cell: name, pending: 0, lag: 0 });
      }
    });
  });

  it("a corq-cell that names no cell is a 400", async () => {
    for (const path of ["/consume/hooks", "/dispatch"]) {
      const refused = await api("POST", path, { headers: { "corq-slot": "1", "corq-cell": "nowhere" } });
      expect(refused.status).toBe(400);
      expect(refused.type).toContain("application/problem+json");
      expect(refused.json.detail).toContain('no cell "nowhere"');
    }
    // a consumer slot without its cell is refused too (a slot is one cell's)
    const withoutCell = await api("POST", "/consume/hooks", { headers: { "corq-slot": "1" } });
    expect(withoutCell.status).toBe(400);
  });
});
