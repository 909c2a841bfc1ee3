// Queue-state statements commit without waiting for the WAL flush; appends always wait.
import { describe, expect, it } from "vitest";
import { PgDialect } from "drizzle-orm/pg-core";
import type { SQL } from "drizzle-orm";
import { useCorq } from "./helpers/corq.js";
import { claimBatch } from "../src/sql/consume/claimBatch.js";
import { advanceSubscription } from "../src/sql/advance/advanceSubscription.js";
import { appendEvents } from "../src/sql/log/appendEvents.js";
import { releaseLease } from "../src/sql/consume/releaseLease.js";
import { createCorq } from "../src/index.js";
import type pg from "pg";

const open = useCorq();
const dialect = new PgDialect();

describe("synchronous_commit per statement", () => {
  it("is off inside claim and advance statements, and untouched by append", async () => {
    const { corq, raw } = await open({ subscriptions: [{ name: "s", handle: () => undefined }] });
    await corq.append("k", [{ name: "E", data: {} }]);
    const { rows: subs } = await raw.query("SELECT id FROM corq.subscriptions");
    expect(await settingAfter(raw, appendEvents("k", [{ name: "E", data: {} }]))).toBe("on");
    expect(await settingAfter(raw, advanceSubscription(subs[0].id, 10))).toBe("off");
    expect(await settingAfter(raw, claimBatch("s"))).toBe("off");
  });

  it("is off in every statement a consume sends — claim, then ack or fail — in a drain's settle+claim, and in a lease release", async () => {
    let fail = false;
    const subscriptions = [
      {
        name: "s",
        backoff: { initialMs: 0, maxMs: 0, factor: 1 },
        handle: () => {
          if (fail) throw new Error("handler failed");
        },
      },
    ];
    const { corq, raw } = await open({ subscriptions });
    const recorder = settingsSeen(raw);
    const recorded = createCorq({ db: recorder.connection, subscriptions });
    for (const key of ["a", "b", "c", "d"]) await corq.append(key, [{ name: "E", data: {} }]);
    await corq.advance();

    const settings = async (action: () => Promise<unknown>) => {
      recorder.seen.length = 0;
      await action();
      return recorder.seen.map((s) => s.setting);
    };
    expect(await settings(() => recorded.consume("s"))).toEqual(["off", "off"]); // claim, ack
    fail = true;
    expect(await settings(() => recorded.consume("s"))).toEqual(["off", "off"]); // claim, fail
    fail = false;
    // claim of 2 keys, settle + claim, settle (+ claim nothing), then the dashboard's activity
    // record (telemetry, not queue state)
    const drained = await settings(() => recorded.drain("s", { budgetMs: 10_000, keysPerClaim: 2 }));
    expect(drained.length).toBeGreaterThanOrEqual(4);
    expect(drained.slice(0, -1).every((s) => s === "off")).toBe(true);
    expect(recorder.seen.at(-1)?.text).toContain('"activity"');
    // an append through the same door waits for the flush
    expect(await settings(() => recorded.append("e", [{ name: "E", data: {} }]))).toEqual(["on"]);

    // a claim whose batch came out empty gives its key back: that release too
    await corq.append("f", [{ name: "E", data: {} }]);
    await corq.advance();
    const { sql: claimText, params } = dialect.sqlToQuery(claimBatch("s"));
    const { rows } = await raw.query(claimText, params);
    const lease = { subscriptionId: rows[0].subscription_id, key: rows[0].key, token: rows[0].lease_token };
    expect(await settingAfter(raw, releaseLease(lease))).toBe("off");
    expect((await corq.keys("s", { status: "ready" })).map((k) => k.key)).toEqual(["f"]);
  });
});

/** The setting inside the statement's own transaction, rolled back: what its commit would use. */
async function settingAfter(raw: pg.Pool, statement: SQL) {
  const client = await raw.connect();
  try {
    await client.query("SET synchronous_commit = on"); // the test cluster runs with it off
    await client.query("BEGIN");
    const { sql, params } = dialect.sqlToQuery(statement);
    await client.query(sql, params);
    const { rows } = await client.query("SELECT current_setting('synchronous_commit') AS value");
    await client.query("ROLLBACK");
    return rows[0].value;
  } finally {
    await client.query("RESET synchronous_commit");
    client.release();
  }
}

/**
 * A connection for createCorq({ db }) that runs each statement corq sends in a transaction of
 * its own and notes the synchronous_commit setting it leaves before the commit: what that
 * statement's commit used. The statements take effect as usual.
 */
function settingsSeen(raw: pg.Pool) {
  const seen: { text: string; setting: string }[] = [];
  const connection = {
    async query(config: { text: string; values: unknown[] }) {
      const client = await raw.connect();
      try {
        await client.query("SET synchronous_commit = on");
        await client.query("BEGIN");
        const result = await client.query({ text: config.text, values: config.values });
        const { rows } = await client.query("SELECT current_setting('synchronous_commit') AS value");
        await client.query("COMMIT");
        seen.push({ text: config.text, setting: rows[0].value });
        return result;
      } catch (error) {
        await client.query("ROLLBACK").catch(() => undefined);
        throw error;
      } finally {
        await client.query("RESET synchronous_commit").catch(() => undefined);
        client.release();
      }
    },
  };
  return { connection, seen };
}
