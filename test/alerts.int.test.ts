// Alerts in the library on real Postgres, sent to a real receiver that checks every signature
// with node:crypto: a dead key is one signed alert (and a key dead before the alert, none), the
// min interval and the same death kept once, lag counted whole, a failing advance, a transaction
// holding the horizon, a failed send retried with its id and given up after its tries, several
// passes at once sending once, a slow receiver not holding up the others, and bad input refused
// with nothing written.
import pg from "pg";
import { afterEach, describe, expect, inject, it } from "vitest";
import type { AlertInput, Corq } from "../src/index.js";
import { createExecutor } from "../src/db/executor.js";
import { recordAlerts, type AlertCandidate } from "../src/sql/alerts/alertSends.js";
import { useCorq, sleep } from "./helpers/corq.js";
import { createTestDatabase } from "./helpers/database.js";
import { startReceiver, type Receiver } from "./helpers/receiver.js";
import { eventually } from "./helpers/until.js";

const open = useCorq();
const SECRET = "alerts-test-secret";

const receivers: Receiver[] = [];
afterEach(async () => {
  for (const receiver of receivers.splice(0)) await receiver.close();
});
async function receiver(secret = SECRET) {
  const started = await startReceiver(() => secret);
  receivers.push(started);
  return started;
}

const failing = { name: "failing", maxAttempts: 1, handle: () => Promise.reject(new Error("receiver down")) };

/** One event of `stream` in "failing", consumed once: its key is dead. */
async function killKey(corq: Corq, stream: string) {
  await corq.append(stream, [{ name: "E", data: {} }]);
  await corq.advance();
  expect(await corq.consume("failing")).toMatchObject({ key: stream, outcome: "dead" });
}

const nothing = { sent: 0, retrying: 0, failed: 0 };

describe("alerts", () => {
  it("a dead key: one signed alert with its subscription, key, position, error and time of death; once", async () => {
    const statements: string[] = [];
    const { corq } = await open({
      subscriptions: [failing],
      pushAllowPrivate: true,
      onStatement: (text) => void statements.push(text),
    });
    const hook = await receiver();
    // no alert: one statement, and nothing else
    statements.length = 0;
    expect(await corq.checkAlerts()).toEqual({ alerts: 0, ...nothing });
    expect(statements).toHaveLength(1);

    await killKey(corq, "before-the-alert");
    const put = await corq.putAlert("ops", { url: hook.url, secret: SECRET, on: ["key.dead"] });
    expect(put).toMatchObject({ created: true, secret: SECRET, alert: { name: "ops", on: ["key.dead"] } });
    // a key dead before the alert existed is not news
    statements.length = 0;
    expect(await corq.checkAlerts()).toMatchObject(nothing);
    expect(statements).toHaveLength(2); // the pass, the dead keys since the last one

    await killKey(corq, "order-1");
    expect(await corq.checkAlerts()).toEqual({ alerts: 1, sent: 1, retrying: 0, failed: 0 });
    const dead = (await corq.deadLetters({ subscription: "failing" })).find((d) => d.key === "order-1");
    expect(hook.deliveries).toHaveLength(1);
    const [delivery] = hook.deliveries;
    expect(delivery?.signatureValid).toBe(true);
    expect(delivery?.id).toMatch(/^msg_[0-9a-f]{32}$/);
    expect(delivery?.headers).toMatchObject({ "content-type": "application/json", "user-agent": "corq" });
    expect(delivery?.body).toEqual({
      type: "key.dead",
      subscription: "failing",
      key: "order-1",
      position: dead?.position,
      error: dead?.lastError,
      at: dead?.deadAt,
    });
    expect(dead?.lastError).toContain("receiver down");

    // checked again (and again): nothing more
    expect(await corq.checkAlerts()).toMatchObject(nothing);
    expect(await corq.checkAlerts()).toMatchObject(nothing);
    expect(hook.deliveries).toHaveLength(1);
    expect(await corq.alerts()).toEqual([
      {
        name: "ops",
        url: hook.url,
        on: ["key.dead"],
        lagOver: null,
        heldOverMs: null,
        minIntervalMs: 600_000,
        sent: 1,
        failed: 0,
        lastSend: {
          type: "key.dead",
          subscription: "failing",
          key: "order-1",
          at: dead?.deadAt,
          sentAt: expect.any(String),
          attempts: 1,
          error: null,
          retrying: false,
        },
        createdAt: expect.any(String),
        updatedAt: expect.any(String),
      },
    ]);
  });

  it("one alert per key per minIntervalMs; the same death never twice, a new one after the interval", async () => {
    const { corq } = await open({ subscriptions: [failing], pushAllowPrivate: true });
    const hook = await receiver();
    await corq.putAlert("daily", { url: `${hook.url}?alert=daily`, secret: SECRET, on: ["key.dead"] });
    await corq.putAlert("often", {
      url: `${hook.url}?alert=often`,
      secret: SECRET,
      on: ["key.dead"],
      minIntervalMs: 1,
    });
    const to = (alert: string) => hook.deliveries.filter((d) => d.url.endsWith(`alert=${alert}`));

    await killKey(corq, "k");
    expect(await corq.checkAlerts()).toMatchObject({ sent: 2, retrying: 0, failed: 0 });
    await sleep(5);
    // the same death, looked at again past "often"'s interval: not sent again
    expect(await corq.checkAlerts()).toMatchObject(nothing);

    // the key is retried and dies again: "often" says so, "daily" has said it within its 10 minutes
    expect(await corq.releaseDeadLetters({ subscription: "failing", key: "k" })).toEqual({ released: 1 });
    expect(await corq.consume("failing")).toMatchObject({ key: "k", outcome: "dead" });
    expect(await corq.checkAlerts()).toMatchObject({ sent: 1, retrying: 0, failed: 0 });
    expect(to("daily").map((d) => d.body.key)).toEqual(["k"]);
    expect(to("often").map((d) => d.body.key)).toEqual(["k", "k"]);
    expect(to("often")[1]?.body.at).not.toEqual(to("often")[0]?.body.at);
    expect(hook.deliveries.every((d) => d.signatureValid)).toBe(true);
  });

  it("subscription.lag: events not handled (not advanced, and queued) over lagOver, counted whole", async () => {
    const { corq } = await open({
      subscriptions: [
        { name: "slow", events: ["Slow"], handle: () => undefined },
        { name: "quick", events: ["Quick"], handle: () => undefined },
      ],
      pushAllowPrivate: true,
    });
    const hook = await receiver();
    await corq.putAlert("behind", {
      url: hook.url,
      secret: SECRET,
      on: ["subscription.lag"],
      lagOver: 2,
      minIntervalMs: 1,
    });
    await corq.putAlert("far-behind", {
      url: `${hook.url}?far`,
      secret: SECRET,
      on: ["subscription.lag"],
      lagOver: 10,
    });
    for (let i = 0; i < 5; i++) await corq.append(`slow-${i}`, [{ name: "Slow", data: {} }]);
    await corq.append("quick-1", [{ name: "Quick", data: {} }]);
    await corq.advance();
    await corq.drain("quick");
    // queued, not handled: 5 (counted past the 3 the check needed)
    expect(await corq.checkAlerts()).toMatchObject({ sent: 1, retrying: 0, failed: 0 });
    expect(hook.deliveries.map((d) => d.body)).toEqual([
      { type: "subscription.lag", subscription: "slow", lag: 5, at: expect.any(String) },
    ]);
    // 3 more, not advanced: 8 in all — and 3 for "quick" too (its lag, as in its stats, is the
    // log past its watermark, whatever its filter takes: advancing is what it has not done)
    for (let i = 0; i < 3; i++) await corq.append(`slow-${i}`, [{ name: "Slow", data: {} }]);
    await sleep(5);
    expect(await corq.checkAlerts()).toMatchObject({ sent: 2, retrying: 0, failed: 0 });
    const bySubscription = (i: number) => ({
      [String(hook.deliveries[i]?.body.subscription)]: hook.deliveries[i]?.body.lag,
    });
    expect({ ...bySubscription(1), ...bySubscription(2) }).toEqual({ slow: 8, quick: 3 });
    for (const name of ["slow", "quick"]) {
      const { lag, pending } = await corq.subscription(name);
      expect(lag + pending).toBe(name === "slow" ? 8 : 3);
    }
    // handled: nothing to say
    await corq.advance();
    await corq.drain("slow");
    await sleep(5);
    expect(await corq.checkAlerts()).toMatchObject(nothing);
    expect(hook.deliveries).toHaveLength(3);
  });

  it("advance.failed: the subscription and the advance's error, while it fails; to the alerts that watch it only", async () => {
    const { corq, raw } = await open({
      subscriptions: [
        { name: "broken", handle: () => undefined },
        { name: "fine", handle: () => undefined },
      ],
      pushAllowPrivate: true,
    });
    const hook = await receiver();
    await corq.putAlert("advances", { url: hook.url, secret: SECRET, on: ["advance.failed"], minIntervalMs: 1 });
    // an alert that watches something else hears nothing of it
    await corq.putAlert("lagging", { url: `${hook.url}?lag`, on: ["subscription.lag"], lagOver: 1000 });
    await corq.advance();
    expect(await corq.checkAlerts()).toMatchObject(nothing);
    // the database refuses every queue row of "broken" (a fault injected in Postgres)
    await raw.query(`
      CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF NEW.subscription_id = (SELECT id FROM corq.subscriptions WHERE name = 'broken') THEN RAISE EXCEPTION 'disk says no'; END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER refuse BEFORE INSERT ON corq.queue FOR EACH ROW EXECUTE FUNCTION refuse();`);
    await corq.append("s", [{ name: "E", data: {} }]);
    await corq.advance();
    const { advanceError } = await corq.subscription("broken");
    expect(await corq.checkAlerts()).toMatchObject({ sent: 1, retrying: 0, failed: 0 });
    expect(hook.deliveries.map((d) => d.body)).toEqual([
      { type: "advance.failed", subscription: "broken", error: advanceError?.message, at: advanceError?.at },
    ]);
    expect(advanceError?.message).toMatch(/disk says no/);

    await raw.query("DROP TRIGGER refuse ON corq.queue");
    await corq.advance();
    await sleep(5);
    expect(await corq.checkAlerts()).toMatchObject(nothing);
    expect(hook.deliveries).toHaveLength(1);
  });

  it("horizon.held: a transaction holding the advance longer than heldOverMs, named by its pid; a snapshot alone is not", async () => {
    const { corq, url } = await open({ pushAllowPrivate: true });
    const hook = await receiver();
    await corq.putAlert("horizon", { url: hook.url, secret: SECRET, on: ["horizon.held"], heldOverMs: 1 });
    const hold = async (kind: "xid" | "snapshot") => {
      const client = new pg.Client({ connectionString: url, application_name: "held-by-test" });
      await client.connect();
      const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]?.pid as number;
      if (kind === "xid") {
        await client.query("BEGIN");
        await client.query("SELECT pg_current_xact_id()");
      } else {
        await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
        await client.query("SELECT count(*) FROM corq.events");
      }
      return { pid, client };
    };
    const mentioning = (pid: number) => hook.deliveries.filter((d) => String(d.body.error).includes(`pid ${pid} `));

    const snapshot = await hold("snapshot");
    const held = await hold("xid");
    try {
      await sleep(20);
      const sent = await corq.checkAlerts();
      expect(sent.sent).toBeGreaterThanOrEqual(1);
      expect(mentioning(held.pid).map((d) => d.body)).toEqual([
        {
          type: "horizon.held",
          error: expect.stringMatching(
            /^pid \d+ \(idle in transaction, database corq_test_\w+\) has held a transaction open for/,
          ),
          at: expect.any(String),
        },
      ]);
      expect(mentioning(snapshot.pid)).toEqual([]);
      // still held: not again within the interval
      expect(await corq.checkAlerts()).toMatchObject(nothing);
    } finally {
      await held.client.end();
      await snapshot.client.end();
    }
  });

  it("horizon.held from another database names pid, state, age and database, never that session's query text", async () => {
    const { corq, raw } = await open({ pushAllowPrivate: true });
    const hook = await receiver();
    await corq.putAlert("horizon", { url: hook.url, secret: SECRET, on: ["horizon.held"], heldOverMs: 1 });
    // another application's session, in another database of the cluster: it wrote (it has a
    // transaction id: every advance here waits), then runs a statement with a secret in its text
    const elsewhere = await createTestDatabase(inject("postgresUrl"), { migrated: false });
    const database = new URL(elsewhere.url).pathname.slice(1);
    const client = new pg.Client({ connectionString: elsewhere.url, application_name: "billing-app" });
    await client.connect();
    try {
      const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]?.pid as number;
      await client.query("BEGIN");
      await client.query("SELECT pg_current_xact_id()");
      const running = client
        .query("SELECT 'api_key=sk_live_0123456789abcdef' AS leaked, pg_sleep(30)")
        .catch(() => undefined);
      await eventually(async () => {
        const { rows } = await raw.query("SELECT state FROM pg_stat_activity WHERE pid = $1", [pid]);
        expect(rows[0]?.state).toBe("active");
      });
      await sleep(20);
      expect((await corq.checkAlerts()).sent).toBeGreaterThanOrEqual(1);
      const about = hook.deliveries.filter((d) => String(d.body.error).includes(`pid ${pid} `));
      expect(about.map((d) => d.body)).toEqual([
        {
          type: "horizon.held",
          error: expect.stringMatching(
            new RegExp(
              `^pid ${pid} \\(active, database ${database}\\) has held a transaction open for \\d+ (ms|s)\\. `,
            ),
          ),
          at: expect.any(String),
        },
      ]);
      // not to the receiver, and not kept in corq's own tables for a later try either
      for (const text of [
        JSON.stringify(hook.deliveries.map((d) => d.body)),
        JSON.stringify((await raw.query("SELECT payload FROM corq.alert_sends")).rows),
      ]) {
        expect(text).not.toContain("sk_live");
        expect(text).not.toContain("pg_sleep");
      }
      await raw.query("SELECT pg_cancel_backend($1)", [pid]);
      await running;
    } finally {
      await client.end();
      await elsewhere.drop();
    }
  });

  it("a failed send is retried after its backoff with the same webhook id, and given up after its tries", async () => {
    const { corq, raw } = await open({ subscriptions: [failing], pushAllowPrivate: true });
    const hook = await receiver();
    let answers = [500];
    hook.behave(() => ({ status: answers.shift() ?? 200 }));
    await corq.putAlert("ops", { url: hook.url, secret: SECRET, on: ["key.dead"] });
    await killKey(corq, "k1");
    expect(await corq.checkAlerts()).toMatchObject({ sent: 0, retrying: 1, failed: 0 });
    expect((await corq.alerts())[0]?.lastSend).toMatchObject({
      key: "k1",
      sentAt: null,
      attempts: 1,
      error: "HTTP 500",
      retrying: true,
    });
    // not before its backoff
    expect(await corq.checkAlerts()).toMatchObject(nothing);
    expect(hook.deliveries).toHaveLength(1);
    await eventually(async () => expect(await corq.checkAlerts()).toMatchObject({ sent: 1, retrying: 0, failed: 0 }), {
      intervalMs: 200,
    });
    expect(hook.deliveries.map((d) => d.id)).toEqual([hook.deliveries[0]?.id, hook.deliveries[0]?.id]);
    expect(hook.deliveries.every((d) => d.signatureValid)).toBe(true);
    expect((await corq.alerts())[0]).toMatchObject({ sent: 1, failed: 0, lastSend: { attempts: 2, error: null } });

    // a receiver that never takes it: six tries (the waits between them skipped), then given up
    answers = Array(6).fill(503);
    await killKey(corq, "k2");
    expect(await corq.checkAlerts()).toMatchObject({ sent: 0, retrying: 1, failed: 0 });
    for (let attempt = 2; attempt <= 6; attempt++) {
      await raw.query("UPDATE corq.alert_sends SET next_at = now() WHERE next_at IS NOT NULL");
      expect(await corq.checkAlerts()).toMatchObject(
        attempt < 6 ? { sent: 0, retrying: 1, failed: 0 } : { sent: 0, retrying: 0, failed: 1 },
      );
    }
    expect(await corq.checkAlerts()).toMatchObject(nothing);
    expect(hook.deliveries.filter((d) => d.body.key === "k2")).toHaveLength(6);
    expect((await corq.alerts())[0]).toMatchObject({
      sent: 1,
      failed: 1,
      lastSend: { key: "k2", attempts: 6, error: "HTTP 503", retrying: false, sentAt: null },
    });
  });

  it("several passes at once send an alert once", async () => {
    const { corq, another } = await open({ subscriptions: [failing], pushAllowPrivate: true });
    const hook = await receiver();
    await corq.putAlert("ops", { url: hook.url, secret: SECRET, on: ["key.dead"] });
    const others = [another({ pushAllowPrivate: true }), another({ pushAllowPrivate: true })];
    await killKey(corq, "k");
    const passes = await Promise.all([corq, ...others, corq].map((c) => c.checkAlerts()));
    expect(passes.reduce((sum, p) => sum + p.sent, 0)).toBe(1);
    expect(hook.deliveries).toHaveLength(1);
  });

  it("the database keeps the rule whoever evaluates: within the min interval, for the same death, or while sending, nothing is recorded", async () => {
    const { corq, raw } = await open({ pushAllowPrivate: true });
    await corq.putAlert("ops", { url: "https://alerts.example/hook", on: ["key.dead", "advance.failed"] });
    const alertId = (await raw.query<{ id: number }>("SELECT id FROM corq.alerts")).rows[0]?.id as number;
    const db = createExecutor(raw);
    const record = async (candidate: Omit<AlertCandidate, "alertId" | "payload">) => {
      const payload = { type: candidate.type, at: new Date().toISOString() };
      const [row] = await db.run<{ recorded: number }>(recordAlerts([{ ...candidate, alertId, payload }], []));
      return row?.recorded;
    };
    const olderThanTheInterval = () =>
      raw.query("UPDATE corq.alert_sends SET queued_at = now() - interval '11 minutes', next_at = NULL");
    const failing = { type: "advance.failed", subject: '["s"]', incident: null } as const;
    expect(await record(failing)).toBe(1);
    expect(await record(failing)).toBe(0);
    await olderThanTheInterval();
    expect(await record(failing)).toBe(1);
    // a dead key: a new death only, and only after the interval
    const death = (incident: string) => ({ type: "key.dead", subject: '["s", "k"]', incident }) as const;
    expect(await record(death("1"))).toBe(1);
    await olderThanTheInterval();
    expect(await record(death("1"))).toBe(0);
    expect(await record(death("2"))).toBe(1);
    expect(await record(death("3"))).toBe(0);
    // a sender holds it: not replaced under it
    await olderThanTheInterval();
    await raw.query("UPDATE corq.alert_sends SET sending_until = now() + interval '1 minute'");
    expect(await record(death("4"))).toBe(0);
    expect(await record(failing)).toBe(0);
  });

  it("more dead keys than a pass takes: the passes after it take the rest, each once", async () => {
    const { corq, raw } = await open({ subscriptions: [{ ...failing, batchSize: 1 }], pushAllowPrivate: true });
    const hook = await receiver();
    await corq.putAlert("ops", { url: hook.url, secret: SECRET, on: ["key.dead"] });
    const keys = 520; // a pass takes 500 dead keys of a subscription
    for (let i = 0; i < keys; i += 100) {
      const streams = Array.from({ length: Math.min(100, keys - i) }, (_, j) => `k-${i + j}`);
      await Promise.all(streams.map((stream) => corq.append(stream, [{ name: "E", data: {} }])));
    }
    await corq.advance();
    await corq.drain("failing", { keysPerClaim: 64 });
    expect((await corq.subscription("failing")).keys.dead).toBe(keys);
    // as if they had died 20 minutes ago, an hour into the alert's life: older than a pass's lookback
    await raw.query("UPDATE corq.keys SET dead_at = dead_at - interval '20 minutes'");
    await raw.query(
      "UPDATE corq.alerts SET created_at = now() - interval '1 hour', checked_at = now() - interval '1 hour'",
    );
    const sent = [];
    for (let pass = 0; pass < 4; pass++) sent.push((await corq.checkAlerts({ maxSends: 1000 })).sent);
    expect(sent).toEqual([500, 20, 0, 0]);
    const alerted = hook.deliveries.map((d) => String(d.body.key));
    expect(new Set(alerted).size).toBe(keys);
    expect(alerted).toHaveLength(keys);
  });

  it("a slow receiver holds up only its own alert", async () => {
    const { corq } = await open({ subscriptions: [failing], pushAllowPrivate: true });
    const slow = await receiver();
    const fast = await receiver();
    slow.behave(() => ({ delayMs: 1500 }));
    await corq.putAlert("slow", { url: slow.url, secret: SECRET, on: ["key.dead"] });
    await corq.putAlert("fast", { url: fast.url, secret: SECRET, on: ["key.dead"] });
    await killKey(corq, "k");
    expect(await corq.checkAlerts()).toMatchObject({ sent: 2, retrying: 0, failed: 0 });
    // sent side by side: the fast receiver had its alert before the slow one answered
    expect(fast.deliveries[0]?.receivedAt).toBeLessThan(slow.deliveries[0]?.finishedAt ?? 0);
  });

  it("puts, replaces (the secret kept unless given), lists and deletes", async () => {
    const { corq } = await open({ subscriptions: [failing], pushAllowPrivate: true });
    const hook = await receiver();
    const created = await corq.putAlert("ops", { url: hook.url, on: ["key.dead", "advance.failed", "key.dead"] });
    expect(created).toMatchObject({ created: true, alert: { on: ["key.dead", "advance.failed"] } });
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    const replaced = await corq.putAlert("ops", {
      url: hook.url,
      on: ["subscription.lag", "horizon.held", "key.dead"],
      minIntervalMs: 60_000,
    });
    expect(replaced).toEqual({
      created: false,
      alert: expect.objectContaining({
        on: ["key.dead", "subscription.lag", "horizon.held"],
        lagOver: 1000,
        heldOverMs: 60_000,
        minIntervalMs: 60_000,
      }),
    });
    // signed with the secret made at creation
    const hooked = await startReceiver(() => created.secret);
    receivers.push(hooked);
    await corq.putAlert("ops", { url: hooked.url, on: ["key.dead"] });
    await killKey(corq, "k");
    await corq.checkAlerts();
    expect(hooked.deliveries.map((d) => d.signatureValid)).toEqual([true]);

    await corq.deleteAlert("ops");
    expect(await corq.alerts()).toEqual([]);
    await expect(corq.deleteAlert("ops")).rejects.toMatchObject({ code: "unknown_alert" });
  });

  it("refuses bad input (private addresses, unknown conditions, thresholds under 1) and writes nothing", async () => {
    const { corq } = await open({ pushAllowPrivate: false });
    const url = "https://alerts.example/hook";
    await corq.putAlert("kept", { url, on: ["key.dead"], secret: SECRET });
    const before = await corq.alerts();
    const bodies: [unknown, string][] = [
      [{ url: "http://127.0.0.1:9/hook", on: ["key.dead"] }, "url"],
      [{ url: "http://10.1.2.3/hook", on: ["key.dead"] }, "url"],
      [{ url: "http://localhost:8787/hook", on: ["key.dead"] }, "url"],
      [{ url: "http://[::1]/hook", on: ["key.dead"] }, "url"],
      [{ url: "http://169.254.169.254/latest", on: ["key.dead"] }, "url"],
      [{ url: "ftp://alerts.example/hook", on: ["key.dead"] }, "url"],
      [{ url: "https://user:pw@alerts.example/hook", on: ["key.dead"] }, "url"],
      [{ url, on: ["key.died"] }, "on.0"],
      [{ url, on: [] }, "on"],
      [{ url }, "on"],
      [{ url, on: ["subscription.lag"], lagOver: 0 }, "lagOver"],
      [{ url, on: ["subscription.lag"], lagOver: -5 }, "lagOver"],
      [{ url, on: ["subscription.lag"], lagOver: 2.5 }, "lagOver"],
      [{ url, on: ["horizon.held"], heldOverMs: 0 }, "heldOverMs"],
      [{ url, on: ["key.dead"], minIntervalMs: 0 }, "minIntervalMs"],
      [{ url, on: ["key.dead"], minIntervalMs: "600000" }, "minIntervalMs"],
      [{ url, on: ["key.dead"], lagOver: 5 }, "lagOver"],
      [{ url, on: ["key.dead"], heldOverMs: 5 }, "heldOverMs"],
      [{ url, on: ["key.dead"], lagover: 5 }, ""],
      [{ url, on: ["key.dead"], secret: "whsec_tooshort" }, "secret"],
      [{ url, on: ["key.dead"], secret: "" }, "secret"],
    ];
    for (const [body, path] of bodies) {
      const refused = await corq.putAlert("kept", body as AlertInput).then(
        () => null,
        (error: unknown) => error,
      );
      expect(refused, JSON.stringify(body)).toMatchObject({ code: "invalid_input" });
      const details = (refused as { details: { path: string }[] }).details;
      expect(
        details.map((d) => d.path),
        JSON.stringify(body),
      ).toContain(path);
    }
    await expect(corq.putAlert("not a name", { url, on: ["key.dead"] })).rejects.toMatchObject({
      code: "invalid_input",
    });
    await expect(corq.putAlert("new", { url: "http://127.0.0.1/x", on: ["key.dead"] })).rejects.toMatchObject({
      code: "invalid_input",
    });
    expect(await corq.alerts()).toEqual(before);
  });
});
