// The library through a transaction-mode pooler (Debian's PgBouncer 1.18, as Neon's pooled
// `-pooler` host runs one; test/helpers/pgbouncer.ts): appends and deliveries from concurrent
// callers see no error, deliver nothing twice and keep each key's order; and corq leaves no
// session setting behind for the pooler's other clients (issue 48, item 3). Measured before
// the fix: 276 of 400 appends failed ("prepared statement … already exists"), and corq's
// planner SETs leaked into 6 of 6 other clients' sessions.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createCorq, type Corq } from "../src/index.js";
import { createTestDatabase } from "./helpers/database.js";
import {
  pgbouncerAvailable,
  pooledSessionSettings,
  sessionSettings,
  startPgBouncer,
  type RunningPgBouncer,
} from "./helpers/pgbouncer.js";

const CALLERS = 8;
const APPENDS_PER_CALLER = 60;
const KEYS = 24;
const available = pgbouncerAvailable("the library through PgBouncer");

describe.skipIf(!available)("the library through PgBouncer in transaction mode", () => {
  let bouncer: RunningPgBouncer;
  let database: { url: string; drop(): Promise<void> };
  let pooledUrl: string;
  let corq: Corq;
  const delivered: { key: string; position: number }[] = [];

  beforeAll(async () => {
    // an empty database: corq's migrations run through the pooler too (one transaction, a transaction-scoped lock)
    database = await createTestDatabase(inject("postgresUrl"), { migrated: false });
    bouncer = await startPgBouncer(inject("postgresUrl"), { poolSize: 4 });
    pooledUrl = bouncer.pooled(database.url);
    corq = createCorq({
      databaseUrl: pooledUrl,
      poolSize: 12,
      subscriptions: [
        {
          name: "ordered",
          events: ["*"],
          batchSize: 7,
          handle: async (events, ctx) => {
            for (const event of events) delivered.push({ key: ctx.key, position: event.position });
          },
        },
      ],
    });
    await corq.migrate();
    // (and it is the pooler that was used)
    expect(bouncer.output()).toContain(`login attempt: db=${new URL(database.url).pathname.slice(1)} `);
  });

  afterAll(async () => {
    await corq?.close();
    await bouncer?.stop();
    await database?.drop();
  });

  it("8 concurrent callers append while drains and consumes deliver: no error, nothing twice, each key in order", async () => {
    const errors: unknown[] = [];
    let appending = true;
    const appended: number[] = [];
    const caller = async (c: number) => {
      for (let i = 0; i < APPENDS_PER_CALLER; i++) {
        const key = `k${(c * 7 + i) % KEYS}`;
        try {
          const { positions } = await corq.append(key, [{ name: "E", data: { c, i } }]);
          appended.push(...positions);
        } catch (error) {
          errors.push(error);
        }
      }
    };
    // consumers beside the appends: drains (claim+settle in one statement) and single consumes
    const consumer = async (kind: "drain" | "consume") => {
      while (appending) {
        try {
          await corq.advance();
          if (kind === "drain") await corq.drain("ordered", { budgetMs: 200 });
          else while ((await corq.consume("ordered")) !== null);
        } catch (error) {
          errors.push(error);
        }
      }
    };
    const consumers = [consumer("drain"), consumer("drain"), consumer("consume")];
    await Promise.all(Array.from({ length: CALLERS }, (_, c) => caller(c)));
    appending = false;
    await Promise.all(consumers);
    // what is left: advanced and drained to the end
    for (let round = 0; round < 50 && delivered.length < appended.length; round++) {
      await corq.advance();
      await corq.drain("ordered", { budgetMs: 1000 });
    }

    expect(errors.map(String)).toEqual([]);
    expect(appended).toHaveLength(CALLERS * APPENDS_PER_CALLER);
    const positions = delivered.map((d) => d.position);
    expect(new Set(positions).size).toBe(positions.length); // no duplicate
    expect(positions.sort((a, b) => a - b)).toEqual(appended.sort((a, b) => a - b));
    const byKey = new Map<string, number[]>();
    for (const { key, position } of delivered) byKey.set(key, [...(byKey.get(key) ?? []), position]);
    for (const [key, list] of byKey) expect(list, key).toEqual([...list].sort((a, b) => a - b));
  });

  it("leaves no session setting behind: the pooler's other clients find the server's defaults on every session", async () => {
    const direct = await sessionSettings(database.url);
    // corq's traffic went through the pooler's 4 server sessions (the test above, and more here);
    // clients at once take several of them, and each reports the session it ran on
    const seen = await pooledSessionSettings(pooledUrl, {
      clients: 8,
      rounds: 5,
      between: async () => {
        await corq.advance();
        await corq.consume("ordered");
      },
    });
    expect(seen.size).toBeGreaterThanOrEqual(2);
    for (const [pid, settings] of seen) expect(settings, `session ${pid}`).toEqual(direct.settings);
  });
});
