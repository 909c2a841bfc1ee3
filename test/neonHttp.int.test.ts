// The library over Neon's HTTP query path from Node (createCorq({ driver: "neon-http" })), as
// serverless functions outside Workers would run it: against the local HTTP SQL endpoint.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { neonConfig } from "@neondatabase/serverless";
import { sql } from "drizzle-orm";
import pg from "pg";
import { createCorq, type StoredEvent } from "../src/index.js";
import { startHttpSqlEndpoint, type HttpSqlEndpoint } from "../cli/dev/httpSqlEndpoint.js";
import { createTestDatabase } from "./helpers/database.js";

let database: { url: string; drop(): Promise<void> };
let endpoint: HttpSqlEndpoint;

beforeAll(async () => {
  database = await createTestDatabase(inject("postgresUrl"), { migrated: false });
  endpoint = await startHttpSqlEndpoint({ target: database.url, poolSize: 3 });
  neonConfig.fetchEndpoint = endpoint.url;
});

afterAll(async () => {
  await endpoint?.close();
  await database?.drop();
});

describe("driver: neon-http", () => {
  it("migrates, appends, advances, drains, and deletes a subscription — one HTTP request per statement", async () => {
    const statements: string[] = [];
    const handled: string[] = [];
    const corq = createCorq({
      databaseUrl: database.url,
      driver: "neon-http",
      onStatement: (text) => void statements.push(text),
      subscriptions: [
        {
          name: "rooms",
          key: "data.roomId",
          handle: (events: StoredEvent[], ctx) => void handled.push(...events.map((e) => `${ctx.key}:${e.version}`)),
        },
      ],
    });
    try {
      expect((await corq.migrate()).applied.length).toBeGreaterThan(0); // a transaction: the session
      await corq.append(
        "visitor-1",
        [
          { name: "Arrived", data: { roomId: "12" } },
          { name: "Departed", data: { roomId: "12" } },
        ],
        { expectedVersion: -1 },
      );
      await expect(
        corq.append("visitor-1", [{ name: "Arrived", data: { roomId: "12" } }], { expectedVersion: 5 }),
      ).rejects.toMatchObject({
        code: "version_conflict",
        extra: { currentVersion: 1 },
      });
      expect(await corq.advance()).toEqual({ rooms: 2 });
      statements.length = 0;
      expect(await corq.drain("rooms")).toMatchObject({ batches: 1, events: 2 });
      expect(handled).toEqual(["12:0", "12:1"]);
      expect(statements.length).toBeLessThanOrEqual(3); // claim, ack+claim, record
      const { secret } = await corq.putSubscription("push", { deliver: { url: "https://receiver.example/hook" } });
      expect(secret).toMatch(/^whsec_/);
      await corq.deleteSubscription("push"); // a transaction over the session
      expect((await corq.stats()).subscriptions.map((s) => s.name)).toEqual(["rooms"]);
    } finally {
      await corq.close();
    }
  });

  it("runs a transactional handler in a session of its own: its writes commit with the ack, a throw rolls them back", async () => {
    const statements: string[] = [];
    let failNext = true;
    const corq = createCorq({
      databaseUrl: database.url,
      driver: "neon-http",
      onStatement: (text) => void statements.push(text),
      subscriptions: [
        {
          name: "tally",
          events: ["Tallied"],
          key: "data.roomId",
          transactional: true,
          backoff: { initialMs: 10, maxMs: 10, factor: 1 },
          async handle(events, ctx) {
            await ctx.tx!.execute(
              sql`INSERT INTO tally (room, n) VALUES (${ctx.key}, ${events.length})
                  ON CONFLICT (room) DO UPDATE SET n = tally.n + excluded.n`,
            );
            if (failNext) {
              failNext = false;
              throw new Error("once");
            }
          },
        },
      ],
    });
    const raw = new pg.Client({ connectionString: database.url });
    await raw.connect();
    const tally = async () => (await raw.query("SELECT room, n FROM tally")).rows;
    try {
      await corq.migrate();
      await raw.query("CREATE TABLE tally (room text PRIMARY KEY, n int NOT NULL)");
      await corq.append("visitor-t", [
        { name: "Tallied", data: { roomId: "7" } },
        { name: "Tallied", data: { roomId: "7" } },
      ]);
      await corq.advance();
      statements.length = 0;
      expect(await corq.consume("tally")).toMatchObject({ outcome: "retry" });
      // the failure is recorded after the rollback, over HTTP
      expect(statements.filter((t) => /^(BEGIN|ROLLBACK|COMMIT)$/.test(t))).toEqual(["BEGIN", "ROLLBACK"]);
      expect(await tally()).toEqual([]);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(await corq.drain("tally")).toMatchObject({ batches: 2, events: 2 }); // the head alone, then the rest
      expect(await tally()).toEqual([{ room: "7", n: 2 }]);
      expect(await corq.subscription("tally")).toMatchObject({ pending: 0 });
    } finally {
      await raw.end();
      await corq.close();
    }
  });
});
