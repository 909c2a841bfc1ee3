// Scoped tokens in the library (src/tokens.ts, src/sql/operate/tokens.ts) on real Postgres: stored as
// hashes, shown once, found by one indexed read, last use written at most once a minute.
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { scopesAllow, mayAppendTo, TOKEN_SCOPES } from "../src/tokens.js";
import { useCorq } from "./helpers/corq.js";
import { until } from "./helpers/until.js";
import { present } from "./helpers/present.js";

const open = useCorq();

describe("tokens in the library", () => {
  it("are created with the secret shown once, stored as its SHA-256 only, listed without it", async () => {
    const { corq, raw } = await open();
    const created = await corq.createToken({ name: "orders producer", scopes: ["append"], streamPrefix: "orders-" });
    expect(created).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      name: "orders producer",
      scopes: ["append"],
      streamPrefix: "orders-",
      createdAt: expect.any(String),
      lastUsedAt: null,
      token: expect.stringMatching(/^corq_[\w-]{43}$/),
    });
    const reader = await corq.createToken({ name: "grafana", scopes: ["read", "read", "operate"] });
    expect(reader.scopes).toEqual(["read", "operate"]); // once each, in one order
    expect(reader.token).not.toBe(created.token);

    const listed = await corq.listTokens();
    expect(listed.map((t) => t.name)).toEqual(["orders producer", "grafana"]);
    expect(JSON.stringify(listed)).not.toContain(created.token);
    expect(listed[0]).not.toHaveProperty("token");

    // nowhere in the database in clear: the row holds the hex SHA-256 of the secret
    const { rows } = await raw.query("SELECT t::text AS row, hash FROM corq.tokens t ORDER BY created_at");
    expect(rows[0].hash).toBe(createHash("sha256").update(created.token).digest("hex"));
    for (const row of rows) {
      expect(row.row).not.toContain(created.token);
      expect(row.row).not.toContain(created.token.slice(5));
    }
  });

  it("verifyToken: the token's scopes for its secret; null for an unknown, malformed or revoked one", async () => {
    const { corq } = await open();
    const created = await corq.createToken({ name: "ops", scopes: ["operate"] });
    expect(await corq.verifyToken(created.token)).toMatchObject({ id: created.id, scopes: ["operate"] });
    const flipped = created.token.slice(0, -1) + (created.token.endsWith("A") ? "B" : "A");
    for (const wrong of [flipped, "", "corq_", "dev-admin-token", created.token.slice(5), `${created.token} `])
      expect(await corq.verifyToken(wrong), wrong).toBeNull();
    await corq.revokeToken(created.id);
    expect(await corq.verifyToken(created.token)).toBeNull();
    expect(await corq.listTokens()).toEqual([]);
    await expect(corq.revokeToken(created.id)).rejects.toMatchObject({ code: "unknown_token", status: 404 });
    await expect(corq.revokeToken("not-an-id")).rejects.toMatchObject({ code: "invalid_input" });
  });

  it("a lookup is one statement; it writes lastUsedAt only when the last write is a minute old", async () => {
    const statements: string[] = [];
    const { corq, raw } = await open({ onStatement: (text) => statements.push(text) });
    const { id, token } = await corq.createToken({ name: "producer", scopes: ["append"] });
    const lastUsed = async () =>
      (await raw.query("SELECT last_used_at FROM corq.tokens WHERE id = $1", [id])).rows[0].last_used_at as Date | null;
    // the row's version (xmin) changes only when the lookup writes
    const version = async () =>
      (await raw.query("SELECT xmin::text FROM corq.tokens WHERE id = $1", [id])).rows[0].xmin;

    statements.length = 0;
    await corq.verifyToken(token);
    expect(statements).toHaveLength(1);
    const first = await lastUsed();
    expect(first).not.toBeNull();
    const written = await version();
    for (let i = 0; i < 5; i++) await corq.verifyToken(token);
    expect(statements).toHaveLength(6);
    expect(await version()).toBe(written); // five lookups, no write
    expect(await lastUsed()).toEqual(first);

    // 61 seconds later, the next lookup writes again (once)
    await raw.query("UPDATE corq.tokens SET last_used_at = last_used_at - interval '61 seconds' WHERE id = $1", [id]);
    const aged = await version();
    await corq.verifyToken(token);
    const moved = await lastUsed();
    expect(moved!.getTime()).toBeGreaterThan(first!.getTime() - 61_000);
    expect(await version()).not.toBe(aged);
    const after = await version();
    await corq.verifyToken(token);
    expect(await version()).toBe(after);
    expect(present((await corq.listTokens())[0], "the token").lastUsedAt).toBe(
      present(moved, "the moved last use").toISOString(),
    );

    // a string that is not shaped like a token costs no statement
    statements.length = 0;
    expect(await corq.verifyToken("Bearer-something")).toBeNull();
    expect(statements).toHaveLength(0);
  });

  it("20 concurrent lookups of a token not used for a minute write it once", async () => {
    const { corq, raw, another } = await open();
    const { id, token } = await corq.createToken({ name: "busy", scopes: ["read"] });
    // every update of a token row, counted exactly by a trigger
    await raw.query(`
      CREATE TABLE public.token_writes (id uuid);
      CREATE FUNCTION public.count_token_write() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN INSERT INTO public.token_writes VALUES (NEW.id); RETURN NEW; END $$;
      CREATE TRIGGER count_token_write AFTER UPDATE ON corq.tokens FOR EACH ROW EXECUTE FUNCTION public.count_token_write();`);
    const others = Array.from({ length: 4 }, () => another());
    const writes = async () => (await raw.query("SELECT count(*)::int AS n FROM public.token_writes")).rows[0].n;
    for (const round of [1, 2]) {
      await raw.query("UPDATE corq.tokens SET last_used_at = now() - interval '2 minutes' WHERE id = $1", [id]);
      const before = await writes();
      // the row locked meanwhile: every lookup has read the old time and waits to write, all at once
      const holder = await raw.connect();
      await holder.query("BEGIN");
      await holder.query("SELECT 1 FROM corq.tokens WHERE id = $1 FOR UPDATE", [id]);
      const lookups = Promise.all(others.flatMap((c) => Array.from({ length: 5 }, () => c.verifyToken(token))));
      await until(
        async () => {
          const { rows } = await raw.query(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%last_used_at%'",
          );
          return rows[0].n === 20;
        },
        { message: "20 lookups waiting to write the last use" },
      );
      await holder.query("COMMIT");
      holder.release();
      const results = await lookups;
      expect(results.every((r) => r?.id === id)).toBe(true);
      expect(await writes(), `round ${round}`).toBe(before + 1);
    }
  });

  it("refuses bad input and writes nothing", async () => {
    const { corq, raw } = await open();
    const cases: [unknown, string][] = [
      [{ name: "", scopes: ["read"] }, "token.name"],
      [{ name: "x".repeat(101), scopes: ["read"] }, "token.name"],
      [{ name: "line\nbreak", scopes: ["read"] }, "token.name"],
      [{ name: "p", scopes: [] }, "token.scopes"],
      [{ name: "p", scopes: ["write"] }, "token.scopes"],
      [{ name: "p", scopes: "read" }, "token.scopes"],
      [{ name: "p", scopes: ["read"], streamPrefix: "orders-" }, "token.streamPrefix"], // a prefix needs append
      [{ name: "p", scopes: ["append", "admin"], streamPrefix: "orders-" }, "token.streamPrefix"],
      [{ name: "p", scopes: ["append"], streamPrefix: "" }, "token.streamPrefix"],
      [{ name: "p", scopes: ["append"], streamPrefix: "bad prefix" }, "token.streamPrefix"],
      [{ name: "p", scopes: ["append"], stream_prefix: "orders-" }, "token"], // a typo is not ignored
    ];
    for (const [input, path] of cases) {
      await expect(corq.createToken(input as never), JSON.stringify(input)).rejects.toMatchObject({
        code: "invalid_input",
        message: expect.stringContaining(path),
      });
    }
    expect((await raw.query("SELECT count(*)::int AS n FROM corq.tokens")).rows[0].n).toBe(0);
  });
});

describe("scopes", () => {
  it("admin includes everything, operate includes read, append and read stand alone", () => {
    const table = Object.fromEntries(
      TOKEN_SCOPES.map((held) => [held, TOKEN_SCOPES.filter((needed) => scopesAllow([held], needed))]),
    );
    expect(table).toEqual({
      append: ["append"],
      read: ["read"],
      operate: ["read", "operate"],
      admin: ["append", "read", "operate", "admin"],
    });
    expect(scopesAllow(["append", "read"], "read")).toBe(true);
    expect(scopesAllow(["append", "read"], "operate")).toBe(false);
  });

  it("a stream prefix limits appends to streams starting with it", () => {
    const producer = { scopes: ["append"] as const, streamPrefix: "orders-" };
    expect(mayAppendTo({ ...producer, scopes: [...producer.scopes] }, "orders-1")).toBe(true);
    expect(mayAppendTo({ ...producer, scopes: [...producer.scopes] }, "orders-")).toBe(true);
    expect(mayAppendTo({ ...producer, scopes: [...producer.scopes] }, "order-1")).toBe(false);
    expect(mayAppendTo({ ...producer, scopes: [...producer.scopes] }, "xorders-1")).toBe(false);
    expect(mayAppendTo({ scopes: ["append"], streamPrefix: null }, "anything")).toBe(true);
    expect(mayAppendTo({ scopes: ["admin"], streamPrefix: null }, "anything")).toBe(true);
    expect(mayAppendTo({ scopes: ["operate"], streamPrefix: null }, "anything")).toBe(false);
  });
});
