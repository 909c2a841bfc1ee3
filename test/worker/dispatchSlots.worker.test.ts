// Dispatch across concurrent kicks: every append kicks a dispatch, and together they start at
// most CORQ_CONCURRENCY consumers (slots claimed in the database), each delivering at most
// CORQ_KEYS_PER_CLAIM keys at once — and lose no wake-up.
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { createCorq } from "../../src/index.js";
import { peakInFlight, useReceiver } from "../helpers/receiver.js";
import { eventually, useStack } from "../helpers/stack.js";

const CONCURRENCY = 3;
// each consumer delivers up to this many keys at once (one claim statement takes them all)
const KEYS_PER_CLAIM = 2;
const { state, api } = useStack({
  // without the wake-up binding: a wake-up armed by an earlier test's waiting keys would dispatch
  // (and advance) on its own, and the counts below are of the dispatches this file makes
  config: fileURLToPath(new URL("./fixtures/noWakeUps.toml", import.meta.url)),
  vars: {
    CORQ_CONCURRENCY: String(CONCURRENCY),
    CORQ_KEYS_PER_CLAIM: String(KEYS_PER_CLAIM),
    CORQ_CONSUMER_BUDGET_MS: "2000",
    CORQ_PUSH_ALLOW_PRIVATE: "true",
  },
});
const hook = useReceiver();

describe("consumer slots", () => {
  it("30 concurrent appends, each kicking a dispatch: at most CORQ_CONCURRENCY consumers at once, every event delivered", async () => {
    const created = await api("PUT", "/subscriptions/pings", {
      body: { events: ["Ping"], batchSize: 1, deliver: { url: hook.receiver.url } },
    });
    hook.secret = created.json.secret;
    hook.receiver.behave(() => ({ delayMs: 150 })); // slow enough for consumers to overlap
    const appends = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        api("POST", `/streams/pinger-${i}/events`, { body: { events: [{ name: "Ping", data: { i } }] } }),
      ),
    );
    expect(appends.every((a) => a.status === 201)).toBe(true);
    // no cron in this stack: only the kicks (and consumers looking again) deliver
    await eventually(async () => expect(new Set(hook.receiver.deliveries.map((d) => d.key)).size).toBe(30), {
      timeoutMs: 30_000,
    });
    // consumers are counted by holders: at most CONCURRENCY of them, each with its claimed keys' deliveries
    expect(peakInFlight(hook.receiver.deliveries)).toBeLessThanOrEqual(CONCURRENCY * KEYS_PER_CLAIM);
    const { rows } = await state.db.query(
      "SELECT count(*)::int AS busy FROM corq.consumer_slots WHERE busy_until > now()",
    );
    await eventually(async () =>
      expect(
        (await state.db.query("SELECT count(*)::int AS busy FROM corq.consumer_slots WHERE busy_until > now()")).rows[0]
          .busy,
      ).toBe(0),
    );
    expect(rows[0].busy).toBeLessThanOrEqual(CONCURRENCY);
  });

  it("kicks that meet in one isolate lose no event name: 40 concurrent appends of 4 names, each taken by its own subscription", async () => {
    const names = ["Red", "Green", "Blue", "Gray"];
    for (const name of names) {
      const created = await api("PUT", `/subscriptions/colour-${name.toLowerCase()}`, {
        body: { events: [name], batchSize: 10, deliver: { url: hook.receiver.url } },
      });
      expect(created.status).toBe(201);
    }
    hook.receiver.behave(() => ({}));
    const appends = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        api("POST", `/streams/colour-${i}/events`, { body: { events: [{ name: names[i % 4], data: { i } }] } }),
      ),
    );
    expect(appends.every((a) => a.status === 201)).toBe(true);
    // no cron: a name dropped by the coalescing would leave its subscription's events queued forever
    await eventually(
      async () => {
        const delivered = new Set(
          hook.receiver.deliveries
            .filter((d) => d.subscription.startsWith("colour-"))
            .flatMap((d) => d.events.map((e) => `${e.name}:${(e.data as { i: number }).i}`)),
        );
        expect(delivered.size).toBe(40);
      },
      { timeoutMs: 30_000 },
    );
  });
});

describe("consumers per ready keys", () => {
  it("a dispatch asks one slot per CORQ_KEYS_PER_CLAIM ready keys: 4 ready keys, 2 per claim, start 2 consumers (of 3 slots)", async () => {
    const created = await api("PUT", "/subscriptions/pairs", {
      body: { events: ["Paired"], batchSize: 1, deliver: { url: hook.receiver.url } },
    });
    expect(created.status).toBe(201);
    hook.receiver.behave(() => ({}));
    // every slot free again (the consumers of the tests above have looked once more and left)
    await eventually(async () =>
      expect(
        (await state.db.query("SELECT count(*)::int AS busy FROM corq.consumer_slots WHERE busy_until > now()")).rows[0]
          .busy,
      ).toBe(0),
    );
    // appended through the library: no append kicks a dispatch, only the call below
    const corq = createCorq({ databaseUrl: state.stack.databaseUrl });
    try {
      for (let i = 0; i < 4; i++) await corq.append(`pair-${i}`, [{ name: "Paired", data: { i } }]);
    } finally {
      await corq.close();
    }
    const response = await api("POST", "/dispatch");
    expect(response.status).toBe(200);
    expect(response.json.advanced).toMatchObject({ pairs: 4 });
    // this invocation is the first of ceil(4 / 2) = 2 consumers; one per ready key would have taken all 3 slots
    expect(response.json.dispatched).toBe(1);
    await eventually(async () => {
      const delivered = hook.receiver.deliveries.filter((d) => d.subscription === "pairs");
      expect(new Set(delivered.map((d) => d.key)).size).toBe(4);
    });
  });
});

describe("events that commit while an older transaction runs", () => {
  it("are delivered once it ends, without a cron: the kick saw them above the horizon and retried", async () => {
    const created = await api("PUT", "/subscriptions/late-comers", {
      body: { events: ["Late"], deliver: { url: hook.receiver.url } },
    });
    expect(created.status).toBe(201);
    const delivered = () => hook.receiver.deliveries.filter((d) => d.subscription === "late-comers").length;
    // an older transaction with an id of its own holds the xmin horizon (in any database of the cluster)
    const older = await state.db.connect();
    try {
      await older.query("BEGIN");
      await older.query("SELECT pg_current_xact_id()");
      const appended = await api("POST", "/streams/late-1/events", { body: { events: [{ name: "Late", data: {} }] } });
      expect(appended.status).toBe(201);
      await new Promise((resolve) => setTimeout(resolve, 400));
      // the append's kick could not advance it past the horizon
      expect(delivered()).toBe(0);
      await older.query("COMMIT");
    } finally {
      older.release();
    }
    await eventually(async () => expect(delivered()).toBe(1), { timeoutMs: 10_000 });
  });

  it("maxLeasedKeys over HTTP: consumers in several isolates deliver at most that many keys at once; 0 is refused", async () => {
    const refused = await api("PUT", "/subscriptions/capped", {
      body: { events: ["Capped"], maxLeasedKeys: 0, deliver: { url: hook.receiver.url } },
    });
    expect(refused.status).toBe(400);
    const created = await api("PUT", "/subscriptions/capped", {
      body: { events: ["Capped"], batchSize: 1, maxLeasedKeys: 1, deliver: { url: hook.receiver.url } },
    });
    expect(created.status).toBe(201);
    expect(created.json.maxLeasedKeys).toBe(1);
    hook.secret = created.json.secret;
    hook.receiver.reset();
    hook.receiver.behave(() => ({ delayMs: 100 }));
    const appends = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        api("POST", `/streams/capped-${i}/events`, { body: { events: [{ name: "Capped", data: { i } }] } }),
      ),
    );
    expect(appends.every((a) => a.status === 201)).toBe(true);
    await eventually(async () => expect(new Set(hook.receiver.deliveries.map((d) => d.key)).size).toBe(12), {
      timeoutMs: 30_000,
    });
    // without the cap CONCURRENCY × KEYS_PER_CLAIM could overlap (the first test saw them)
    expect(peakInFlight(hook.receiver.deliveries)).toBe(1);
  });

  it("maxLeasedKeysPerTenant and tenant over HTTP: consumers in several isolates deliver at most one key of each tenant at once", async () => {
    const refused = await api("PUT", "/subscriptions/tenanted", {
      body: { events: ["Tenanted"], maxLeasedKeysPerTenant: 1, deliver: { url: hook.receiver.url } },
    });
    expect(refused.status).toBe(400); // a cap per tenant needs a tenant
    const created = await api("PUT", "/subscriptions/tenanted", {
      body: {
        events: ["Tenanted"],
        batchSize: 1,
        tenant: "data.tenant",
        maxLeasedKeysPerTenant: 1,
        deliver: { url: hook.receiver.url },
      },
    });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ tenant: "data.tenant", maxLeasedKeysPerTenant: 1 });
    hook.secret = created.json.secret;
    hook.receiver.reset();
    hook.receiver.behave(() => ({ delayMs: 100 }));
    const appends = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        api("POST", `/streams/tenanted-${i}/events`, {
          body: { events: [{ name: "Tenanted", data: { tenant: i % 2 === 0 ? "x" : "y" } }] },
        }),
      ),
    );
    expect(appends.every((a) => a.status === 201)).toBe(true);
    await eventually(async () => expect(new Set(hook.receiver.deliveries.map((d) => d.key)).size).toBe(12), {
      timeoutMs: 30_000,
    });
    const ofTenant = (t: string) =>
      hook.receiver.deliveries.filter((d) => (d.events[0]?.data as { tenant?: string } | undefined)?.tenant === t);
    expect(peakInFlight(ofTenant("x"))).toBe(1);
    expect(peakInFlight(ofTenant("y"))).toBe(1);
    const keys = await api("GET", "/subscriptions/tenanted/keys");
    expect(new Set(keys.json.keys.map((k: { tenant: string }) => k.tenant))).toEqual(new Set(["x", "y"]));
  });

  it("a rate limit over HTTP: consumers in several isolates deliver no more than it allows; a limit of 0 is refused", async () => {
    const refused = await api("PUT", "/subscriptions/limited", {
      body: {
        events: ["Limited"],
        rateLimit: { events: 0, perMs: 1000, by: "subscription" },
        deliver: { url: hook.receiver.url },
      },
    });
    expect(refused.status).toBe(400);
    const created = await api("PUT", "/subscriptions/limited", {
      body: {
        events: ["Limited"],
        batchSize: 1,
        rateLimit: { events: 5, perMs: 60_000, by: "subscription", burst: 5 },
        deliver: { url: hook.receiver.url },
      },
    });
    expect(created.status).toBe(201);
    hook.secret = created.json.secret;
    hook.receiver.reset();
    const appends = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        api("POST", `/streams/limited-${i}/events`, { body: { events: [{ name: "Limited", data: { i } }] } }),
      ),
    );
    expect(appends.every((a) => a.status === 201)).toBe(true);
    await eventually(async () => expect(hook.receiver.deliveries.length).toBe(5), { timeoutMs: 30_000 });
    // the others wait for the limit's room (12 s an event), with no attempt counted
    await eventually(async () => {
      const stats = await api("GET", "/subscriptions/limited");
      expect(stats.json.keys.waiting).toBe(7);
    });
    expect(hook.receiver.deliveries.length).toBe(5);
    const keys = await api("GET", "/subscriptions/limited/keys?status=backoff");
    expect(
      keys.json.keys.every(
        (k: { attempts: number; reason: string }) => k.attempts === 0 && /rate limit/.test(k.reason),
      ),
    ).toBe(true);
  });
});
