// serve's LISTEN checks itself (src/node/wakeListener.ts): a probe NOTIFY sent on another
// connection arrives on a direct connection, and never through a transaction-mode pooler
// (PgBouncer 1.18), which accepts the LISTEN and delivers nothing. A probe is no wake-up: other
// listeners ignore it, as they ignore every payload they do not know.
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import { createExecutor } from "../src/db/executor.js";
import { WAKE_CHANNEL, notifyProbe } from "../src/sql/log/notify.js";
import { listenForWakes, type WakeListener } from "../src/node/wakeListener.js";
import { createTestDatabase } from "./helpers/database.js";
import { pgbouncerAvailable, startPgBouncer, type RunningPgBouncer } from "./helpers/pgbouncer.js";
import { sleep } from "./helpers/corq.js";
import { until } from "./helpers/until.js";

let database: { url: string; drop(): Promise<void> };
let direct: pg.Pool;
const listeners: WakeListener[] = [];

beforeAll(async () => {
  database = await createTestDatabase(inject("postgresUrl"));
  direct = new pg.Pool({ connectionString: database.url, max: 2 });
});
afterEach(async () => {
  for (const listener of listeners.splice(0)) await listener.close();
});
afterAll(async () => {
  await direct?.end();
  await database?.drop();
});

/** A listener on `listenUrl` whose probes go through `sendVia`, and what it reported. */
function listen(listenUrl: string, sendVia: pg.Pool) {
  const db = createExecutor(sendVia);
  const woken: string[] = [];
  const verdicts: boolean[] = [];
  const listener = listenForWakes({
    connectionString: listenUrl,
    onWake: (payload) => woken.push(payload),
    onConnected: () => undefined,
    probe: { send: (token) => db.run(notifyProbe(token)), timeoutMs: 500 },
    onProbed: ({ delivering }) => verdicts.push(delivering),
    log: () => undefined,
  });
  listeners.push(listener);
  return { listener, woken, verdicts };
}

describe("the LISTEN's self-check", () => {
  it("on a direct connection: the probe arrives; a probe of another listener and unknown payloads wake nothing", async () => {
    const { listener, woken, verdicts } = listen(database.url, direct);
    await until(() => verdicts.length > 0, { message: "a verdict" });
    expect(verdicts).toEqual([true]);
    expect(listener.delivering()).toBe(true);
    for (const payload of ["probe:someone-else", "nonsense", "append"])
      await direct.query("SELECT pg_notify($1, $2)", [WAKE_CHANNEL, payload]);
    await until(() => woken.length > 0, { message: "the append heard" });
    await sleep(100);
    expect(woken).toEqual(["append"]);
  });

  it.skipIf(!pgbouncerAvailable("the LISTEN's self-check through PgBouncer"))(
    "through PgBouncer in transaction mode: LISTEN is accepted, the probe never arrives, and it says so",
    async () => {
      const bouncer: RunningPgBouncer = await startPgBouncer(inject("postgresUrl"), { poolSize: 2 });
      const pooled = new pg.Pool({ connectionString: bouncer.pooled(database.url), max: 2 });
      try {
        const { listener, verdicts } = listen(bouncer.pooled(database.url), pooled);
        await until(() => verdicts.length > 0, { message: "a verdict" });
        expect(verdicts).toEqual([false]);
        expect(listener.connected()).toBe(true);
        expect(listener.delivering()).toBe(false);
        // probed again at the next check, and still not delivering
        await listener.check();
        expect(verdicts).toEqual([false, false]);
      } finally {
        for (const listener of listeners.splice(0)) await listener.close();
        await pooled.end();
        await bouncer.stop();
      }
    },
  );
});
