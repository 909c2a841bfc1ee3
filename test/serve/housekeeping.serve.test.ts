// serve runs housekeeping by itself (its safety net, once a minute, the first time at its first
// tick): idle keys past CORQ_KEY_IDLE_MS lose their rows, a key idle for less keeps it, and the
// operational tables are pruned. The database is prepared before the process starts, so its
// first pass finds everything in place.
import { afterAll, describe, expect, inject, it } from "vitest";
import pg from "pg";
import { createCorq } from "../../src/index.js";
import { nodeSettings } from "../../src/node/serve.js";
import { createTestDatabase } from "../helpers/database.js";
import { startServeProcess, type ServeProcess } from "../helpers/serveProcess.js";
import { eventually } from "../helpers/stack.js";

const cleanup: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const step of cleanup.reverse()) await step();
});

describe("serve: housekeeping", () => {
  it("CORQ_KEY_IDLE_MS: 7 days unless set", () => {
    expect(nodeSettings({})).toMatchObject({ keyIdleMs: 604_800_000 });
    expect(nodeSettings({ CORQ_KEY_IDLE_MS: "3600000" })).toMatchObject({ keyIdleMs: 3_600_000 });
    for (const bad of ["abc", "", "0", "-5"])
      expect(nodeSettings({ CORQ_KEY_IDLE_MS: bad }).keyIdleMs).toBe(604_800_000);
  });

  it("compacts keys idle past CORQ_KEY_IDLE_MS and prunes expired sessions and old webhook ids, by itself", async () => {
    const database = await createTestDatabase(inject("postgresUrl"));
    cleanup.push(database.drop);
    const raw = new pg.Pool({ connectionString: database.url, max: 2 });
    cleanup.push(() => raw.end());
    // the serve entry's subscription, defined here too: its keys, consumed before serve starts
    const corq = createCorq({
      databaseUrl: database.url,
      subscriptions: [{ name: "recorded", handle: () => undefined }],
    });
    try {
      await corq.append("idle-2h", [{ name: "E", data: {} }]);
      await corq.append("idle-30m", [{ name: "E", data: {} }]);
      await corq.advance();
      await corq.drain("recorded");
    } finally {
      await corq.close();
    }
    await raw.query(`
      UPDATE corq.keys SET active_at = now() - CASE key WHEN 'idle-2h' THEN interval '2 hours' ELSE interval '30 minutes' END;
      INSERT INTO corq.dashboard_sessions (id, expires_at) VALUES ('expired', now() - interval '1 second'), ('live', now() + interval '1 hour');
      INSERT INTO corq.webhook_ids (id, seen_at) VALUES ('old', now() - interval '11 minutes'), ('recent', now());`);
    const serve: ServeProcess = await startServeProcess({
      databaseUrl: database.url,
      entry: "test/serve/recordingServe.ts",
      env: { CORQ_SAFETY_NET_MS: "100", CORQ_KEY_IDLE_MS: "3600000" },
    });
    try {
      const ids = async (table: string) =>
        (await raw.query(`SELECT id FROM corq.${table} ORDER BY id`)).rows.map((r: { id: string }) => r.id);
      await eventually(
        async () => {
          expect((await raw.query("SELECT key FROM corq.keys ORDER BY key")).rows).toEqual([{ key: "idle-30m" }]);
          expect(await ids("dashboard_sessions")).toEqual(["live"]);
          expect(await ids("webhook_ids")).toEqual(["recent"]);
        },
        { timeoutMs: 15_000 },
      );
    } finally {
      expect(await serve.stop()).toBe(0);
    }
  }, 90_000); // a process start on a loaded machine, then up to 15 s of waiting for its first pass
});
