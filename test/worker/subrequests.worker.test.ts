// A consumer invocation stays inside its subrequest budget (CORQ_MAX_SUBREQUESTS: every HTTP
// statement and push delivery is a subrequest on Workers) and hands the rest of the work to a
// new invocation instead of stopping with keys ready.
import { describe, expect, it } from "vitest";
import { useReceiver } from "../helpers/receiver.js";
import { eventually, useStack } from "../helpers/stack.js";
import { createCorq } from "../../src/index.js";

const MAX = 20;
const { state, api } = useStack({
  vars: { CORQ_MAX_SUBREQUESTS: String(MAX), CORQ_CONCURRENCY: "2", CORQ_PUSH_ALLOW_PRIVATE: "true" },
});
const hook = useReceiver();

describe("subrequest budget", () => {
  it("a consumer drains what fits in CORQ_MAX_SUBREQUESTS, then a new invocation goes on until every key is done", async () => {
    hook.secret = (
      await api("PUT", "/subscriptions/pings", { body: { events: ["Ping"], deliver: { url: hook.receiver.url } } })
    ).json.secret;
    // appended straight into the database: no kick, only the consumer below delivers
    const corq = createCorq({ databaseUrl: state.stack.databaseUrl });
    try {
      for (let i = 0; i < 40; i++) await corq.append(`pinger-${i}`, [{ name: "Ping", data: { i } }]);
    } finally {
      await corq.close();
    }
    expect((await api("POST", "/advance")).json.advanced.pings).toBe(40);
    const first = await api("POST", "/consume/pings", { headers: { "corq-slot": "1" } });
    expect(first.status).toBe(200);
    expect(first.json.batches).toBeGreaterThan(0);
    expect(first.json.subrequests).toBeLessThanOrEqual(MAX);
    expect(first.json.batches).toBeLessThan(40); // it did not do it all: other invocations went on
    await eventually(async () => expect(new Set(hook.receiver.deliveries.map((d) => d.key)).size).toBe(40), {
      timeoutMs: 30_000,
    });
  });
});
