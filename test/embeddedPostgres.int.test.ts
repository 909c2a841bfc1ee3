// The embedded cluster's superuser password: anything on this machine can reach its port, so
// it is random — per throwaway cluster, and per kept data dir (`npm start`), saved beside it.
import { afterAll, describe, expect, it } from "vitest";
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { startEmbeddedPostgres } from "../cli/dev/embeddedPostgres.js";

const root = mkdtempSync(join(tmpdir(), "corq-pg-password-"));
chmodSync(root, 0o755); // as root, the server runs as the `postgres` user, who must reach the data dir
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Connects and runs one query; resolves with the SQLSTATE of a refusal instead. */
async function tryConnect(url: string): Promise<"ok" | string> {
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
    await client.query("SELECT 1");
    return "ok";
  } catch (error) {
    return String((error as { code?: string }).code ?? error);
  } finally {
    await client.end().catch(() => undefined);
  }
}
const withPassword = (url: string, password: string) => Object.assign(new URL(url), { password }).toString();

describe("embedded Postgres password", () => {
  it("is random for a throwaway cluster: the old default `postgres` is refused", async () => {
    const cluster = await startEmbeddedPostgres();
    try {
      expect(new URL(cluster.url).password).toMatch(/^[\w-]{32}$/);
      expect(await tryConnect(cluster.url)).toBe("ok");
      expect(await tryConnect(withPassword(cluster.url, "postgres"))).toBe("28P01");
    } finally {
      await cluster.stop();
    }
  }, 60_000);

  it("is made with a kept data dir, saved beside it (0600), and used again by the next start", async () => {
    const dataDir = join(root, "postgres");
    const first = await startEmbeddedPostgres({ dataDir });
    const password = new URL(first.url).password;
    try {
      expect(password).toMatch(/^[\w-]{32}$/);
      expect(readFileSync(`${dataDir}.password`, "utf8").trim()).toBe(password);
      expect(statSync(`${dataDir}.password`).mode & 0o777).toBe(0o600);
      expect(await tryConnect(withPassword(first.url, "postgres"))).toBe("28P01");
    } finally {
      await first.stop();
    }
    const again = await startEmbeddedPostgres({ dataDir });
    try {
      expect(new URL(again.url).password).toBe(password);
      expect(await tryConnect(again.url)).toBe("ok");
    } finally {
      await again.stop();
    }
  }, 90_000);

  it("replaces `postgres` in a data dir made before passwords were random", async () => {
    const dataDir = join(root, "postgres");
    const old = await startEmbeddedPostgres({ dataDir });
    try {
      const admin = new pg.Client({ connectionString: old.url });
      await admin.connect();
      await admin.query("ALTER ROLE postgres PASSWORD 'postgres'");
      await admin.end();
    } finally {
      await old.stop();
    }
    unlinkSync(`${dataDir}.password`);
    const upgraded = await startEmbeddedPostgres({ dataDir });
    try {
      const password = new URL(upgraded.url).password;
      expect(password).toMatch(/^[\w-]{32}$/);
      expect(readFileSync(`${dataDir}.password`, "utf8").trim()).toBe(password);
      expect(await tryConnect(upgraded.url)).toBe("ok");
      expect(await tryConnect(withPassword(upgraded.url, "postgres"))).toBe("28P01");
    } finally {
      await upgraded.stop();
    }
  }, 90_000);
});
