// Appends NOTIFY the wake channel only when asked (createCorq({ notify: true }): the Node
// runtime): after the commit of an append in its own transaction (coalesced: concurrent
// appends share NOTIFYs), once for a caller's transaction however many appends it holds, and
// never for an append that wrote nothing.
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { WAKE_CHANNEL } from "../src/sql/log/notify.js";
import { useCorq, sleep } from "./helpers/corq.js";

const open = useCorq();
const listeners: pg.Client[] = [];
afterEach(async () => {
  for (const client of listeners.splice(0)) await client.end();
});

/** A LISTENing connection and what it heard. */
async function listen(url: string) {
  const client = new pg.Client({ connectionString: url });
  listeners.push(client);
  await client.connect();
  const heard: string[] = [];
  client.on("notification", (message) => heard.push(`${message.channel}:${message.payload}`));
  await client.query(`LISTEN ${WAKE_CHANNEL}`);
  // a notification is delivered after its commit; this round trip on the listener lets any in flight arrive
  const settle = async () => {
    await sleep(50);
    await client.query("SELECT 1");
  };
  return { heard, settle };
}

describe("append NOTIFY", () => {
  it("notifies after each append with notify: true; never without it; never for a refused append", async () => {
    const { corq, url, another } = await open();
    const { heard, settle } = await listen(url);
    await corq.append("quiet-1", [{ name: "E", data: {} }]);
    await corq.append("quiet-2", [{ name: "E", data: {} }]);
    await settle();
    expect(heard).toEqual([]);

    const notifying = another({ notify: true });
    await notifying.append("loud-1", [
      { name: "E", data: {} },
      { name: "E", data: {} },
    ]);
    await notifying.append("loud-2", [{ name: "E", data: {} }]);
    await settle();
    expect(heard).toEqual([`${WAKE_CHANNEL}:append`, `${WAKE_CHANNEL}:append`]);

    // a version conflict writes nothing and wakes nobody
    await expect(notifying.append("loud-1", [{ name: "E", data: {} }], { expectedVersion: 0 })).rejects.toMatchObject({
      code: "version_conflict",
    });
    await settle();
    expect(heard).toHaveLength(2);
  });

  it("coalesces the NOTIFYs of concurrent appends: fewer than one each, at least one after the last commit", async () => {
    const { url, another } = await open();
    const notifying = another({ notify: true, poolSize: 8 });
    const { heard, settle } = await listen(url);
    await Promise.all(Array.from({ length: 40 }, (_, i) => notifying.append(`many-${i}`, [{ name: "E", data: {} }])));
    await settle();
    expect(heard.length).toBeGreaterThanOrEqual(1);
    expect(heard.length).toBeLessThan(40);
  });

  it("notifies once for a transaction with several appends (the outbox), after it commits, not on rollback", async () => {
    const { url, another, raw } = await open();
    const notifying = another({ notify: true });
    const { heard, settle } = await listen(url);
    const client = await raw.connect();
    try {
      await client.query("BEGIN");
      for (const stream of ["outbox-1", "outbox-2", "outbox-3"])
        await notifying.append(stream, [{ name: "E", data: {} }], { tx: client });
      await settle();
      expect(heard).toEqual([]); // not before the commit
      await client.query("COMMIT");
      await settle();
      expect(heard).toEqual([`${WAKE_CHANNEL}:append`]);

      await client.query("BEGIN");
      await notifying.append("outbox-4", [{ name: "E", data: {} }], { tx: client });
      await client.query("ROLLBACK");
      await settle();
      expect(heard).toHaveLength(1);
    } finally {
      client.release();
    }
  });
});
