// Queue-state statements commit without waiting for the WAL flush; appends always wait.
import { describe, expect, it } from "vitest";
import { PgDialect } from "drizzle-orm/pg-core";
import type { SQL } from "drizzle-orm";
import { useCorq } from "./helpers/corq.js";
import { claimBatch } from "../src/sql/claimBatch.js";
import { advanceSubscription } from "../src/sql/advanceSubscription.js";
import { appendEvents } from "../src/sql/appendEvents.js";

const open = useCorq();
const dialect = new PgDialect();

describe("synchronous_commit per statement", () => {
  it("is off inside claim and advance statements, and untouched by append", async () => {
    const { corq, raw } = await open({ subscriptions: [{ name: "s", handle: () => undefined }] });
    await corq.append("k", [{ name: "E", data: {} }]);
    const { rows: subs } = await raw.query("SELECT id FROM corq.subscriptions");
    const settingAfter = async (statement: SQL) => {
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
    };
    expect(await settingAfter(appendEvents("k", [{ name: "E", data: {} }]))).toBe("on");
    expect(await settingAfter(advanceSubscription(subs[0].id, 10))).toBe("off");
    expect(await settingAfter(claimBatch("s"))).toBe("off");
  });
});
