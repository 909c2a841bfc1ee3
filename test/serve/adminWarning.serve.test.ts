// `startServe` without a usable admin token used to print nothing and then answer 401 to every
// call: it now says so when it starts — a process that serves HTTP; a worker serves none.
import { describe, expect, inject, it } from "vitest";
import { startServe, type ServeRole } from "../../src/node/serve.js";
import { createTestDatabase } from "../helpers/database.js";

/** What a process started with `env` logs, stopped at once. */
async function startLines(env: Record<string, string>, role: ServeRole): Promise<string[]> {
  const database = await createTestDatabase(inject("postgresUrl"));
  const lines: string[] = [];
  try {
    const running = await startServe({
      subscriptions: [],
      env: { DATABASE_URL: database.url, ...env },
      port: 0,
      role,
      log: (line) => lines.push(line),
    });
    await running.stop();
  } finally {
    await database.drop();
  }
  return lines.filter((line) => line.startsWith("warning:"));
}

describe("serve warns at start when the admin API cannot be used", () => {
  const cases: { name: string; env: Record<string, string>; role: ServeRole; warning: RegExp | null }[] = [
    { name: "no admin token", env: {}, role: "all", warning: /CORQ_ADMIN_TOKEN is not configured/ },
    { name: "an API process without one", env: {}, role: "api", warning: /CORQ_ADMIN_TOKEN is not configured/ },
    { name: "a short admin token", env: { CORQ_ADMIN_TOKEN: "short" }, role: "all", warning: /shorter than 32/ },
    { name: "a good admin token", env: { CORQ_ADMIN_TOKEN: "a".repeat(32) }, role: "all", warning: null },
    { name: "a worker (no HTTP)", env: {}, role: "worker", warning: null },
  ];
  for (const { name, env, role, warning } of cases) {
    it(`${name}: ${warning === null ? "no warning" : "one warning"}`, async () => {
      const warnings = await startLines(env, role);
      if (warning === null) expect(warnings).toEqual([]);
      else {
        expect(warnings).toHaveLength(1);
        expect(warnings[0]).toMatch(warning);
      }
    });
  }
});
