// The alerts migration on a populated database of the release before it: queued, leased, dead,
// paused and replaying keys (and a push subscription) go on in order after it, nothing lost; the
// key that was dead before is no alert, a key that dies after is one.
import pg from "pg";
import { describe, expect, inject, it } from "vitest";
import { createCorq, type DeliveredEvent, type HandlerContext } from "../src/index.js";
import { createTestDatabase } from "./helpers/database.js";
import {
  applyMigrations,
  INTERLEAVED_LOG,
  insertEvents,
  migrationIndex,
  seedAdvancedSubscriptions,
  tagsFrom,
} from "./helpers/earlierRelease.js";
import { startReceiver } from "./helpers/receiver.js";

describe("upgrading to alerts", () => {
  it("keeps every queued, leased, dead, paused and replaying key; alerts of what dies after", async () => {
    const database = await createTestDatabase(inject("postgresUrl"), { migrated: false });
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    const hook = await startReceiver(() => "upgrade-secret");
    const handled: string[] = []; // key:version seq (r: replay)
    const handle = (events: DeliveredEvent[], ctx: HandlerContext) =>
      void handled.push(...events.map((e) => `${ctx.key}:${e.version} ${e.seq}${e.replay ? "r" : ""}`));
    const corq = createCorq({
      databaseUrl: database.url,
      pushAllowPrivate: true,
      subscriptions: [
        { name: "s", maxAttempts: 5, handle },
        // new after the upgrade: every key of it dies at its first failure
        { name: "t", events: ["F"], from: "now", maxAttempts: 1, handle: () => Promise.reject(new Error("t fails")) },
      ],
    });
    try {
      const alertsMigration = migrationIndex("_alerts");
      await applyMigrations(client, alertsMigration);
      await insertEvents(client, INTERLEAVED_LOG);
      // in s: key a ready, b leased for an hour, c dead, d paused, e replaying (acked, then rewound)
      await seedAdvancedSubscriptions(
        client,
        `(1, 'a', 3, 0, now(), NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 3, 0, 0),
         (1, 'b', 2, 0, now() + interval '1 hour', gen_random_uuid(), now() + interval '1 hour', 'old', now(), NULL, NULL, NULL, 0, 2, 0, 0),
         (1, 'c', 1, 5, NULL, NULL, NULL, NULL, NULL, now(), (SELECT position FROM corq.events WHERE stream = 'c'), NULL, 0, 1, 0, 0),
         (1, 'd', 2, 0, now(), NULL, NULL, NULL, NULL, NULL, NULL, now(), 0, 2, 0, 0),
         (1, 'e', 2, 0, now(), NULL, NULL, NULL, NULL, NULL, NULL, NULL, 2, 4, 2, 4)`,
      );

      expect((await corq.migrate()).applied).toEqual(tagsFrom(alertsMigration));
      expect(await corq.subscription("s")).toMatchObject({
        pending: 10,
        keys: { ready: 2, leased: 1, dead: 1, paused: 1 },
      });
      expect(await corq.subscription("p")).toMatchObject({ kind: "push", lag: 0 });

      await corq.putAlert("ops", { url: hook.url, secret: "upgrade-secret", on: ["key.dead"] });
      // c died before the alert: no news
      expect(await corq.checkAlerts()).toMatchObject({ alerts: 1, sent: 0 });
      await corq.append("a", [{ name: "E", data: {} }], { expectedVersion: 2 });
      await corq.append("f", [{ name: "F", data: {} }]);
      await corq.advance();
      await corq.drain("s");
      await corq.drain("t");
      expect(await corq.checkAlerts()).toMatchObject({ sent: 1 });
      expect(hook.deliveries.map((d) => [d.signatureValid, d.body.type, d.body.subscription, d.body.key])).toEqual([
        [true, "key.dead", "t", "f"],
      ]);

      const of = (key: string) => handled.filter((h) => h.startsWith(`${key}:`));
      expect(of("a")).toEqual(["a:0 1", "a:1 2", "a:2 3", "a:3 4"]);
      expect(of("f")).toEqual(["f:0 1"]);
      expect(of("e")).toEqual(["e:0 3r", "e:1 4r"]);
      await client.query("UPDATE corq.keys SET lease_until = now(), available_at = now() WHERE key = 'b'"); // the old lease ends
      expect(await corq.releaseDeadLetters({ subscription: "s", key: "c" })).toEqual({ released: 1 });
      await corq.resumeKey("s", "d");
      await corq.drain("s");
      expect(of("b")).toEqual(["b:0 1", "b:1 2"]);
      expect(of("c")).toEqual(["c:0 1"]);
      expect(of("d")).toEqual(["d:0 1", "d:1 2"]);
      expect(await corq.subscription("s")).toMatchObject({ pending: 0, lag: 0 });
    } finally {
      await corq.close();
      await client.end();
      await hook.close();
      await database.drop();
    }
  });
});
