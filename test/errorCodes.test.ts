// Every error code the library and the HTTP API return, listed once: docs/http-api.md's
// "Errors" table. This test holds that table (and docs/library.md's list of the library's codes)
// to the code: src/errors.ts, every problem the HTTP app answers (src/http/, functions/), the
// webhook's refusal reasons, Hono's own HTTP errors. A code added without a row, or a row
// left for a code that is gone, fails here.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { statusByCode } from "../src/errors.js";
import { present } from "./helpers/present.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const read = (path: string) => readFileSync(join(root, path), "utf8");

/** `status type` pairs of the docs table under "## Errors". */
function documented(): string[] {
  const [, errors] = read("docs/http-api.md").split(/^## Errors$/m);
  const [section = ""] = present(errors, 'a "## Errors" section in docs/http-api.md').split(/^## /m);
  return [...section.matchAll(/^\|\s*(\d{3})\s*\|\s*`([a-z_]+)`\s*\|/gm)].map(
    ([, status, type]) => `${status} ${type}`,
  );
}

/** What the HTTP app and the Worker answer: `problem(<status>, "<type>"` and `ProblemError(<status>, "<type>"`. */
function answeredByTheWorker(): string[] {
  const found: string[] = [];
  for (const folder of ["src/http", "functions"]) {
    const files = readdirSync(join(root, folder), { recursive: true, encoding: "utf8" }).filter((f) =>
      /\.tsx?$/.test(f),
    );
    for (const file of files) {
      const text = read(join(folder, file));
      for (const [, status, type] of text.matchAll(/\b(?:problem|ProblemError)\(\s*(\d{3}),\s*"([a-z_]+)"/g))
        found.push(`${status} ${type}`);
    }
  }
  return found;
}

/** The signed webhook answers 401 with the verifier's reason (src/webhookSignature.ts) as its type. */
function webhookReasons(): string[] {
  const text = read("src/webhookSignature.ts");
  return [...text.matchAll(/reason: "([a-z_]+)"/g)].map(([, reason]) => `401 ${reason}`);
}

describe("error codes", () => {
  it("are listed in docs/http-api.md, each once, exactly as the library and the Worker return them", () => {
    const fromCode = new Set([
      ...Object.entries(statusByCode).map(([code, status]) => `${status} ${code}`),
      ...answeredByTheWorker(),
      ...webhookReasons(),
      // (the dashboard's csrf() refusal, Hono's HTTPException 403, is answered as forbidden_origin:
      // src/http/problem.ts, found above)
    ]);
    const table = documented();
    expect(table.length).toBe(new Set(table).size);
    expect([...table].sort()).toEqual([...fromCode].sort());
  });

  it("finds more than one code in each source (the patterns still match the code)", () => {
    expect(Object.keys(statusByCode).length).toBeGreaterThan(5);
    expect(answeredByTheWorker().length).toBeGreaterThan(5);
    expect(webhookReasons()).toEqual(["401 missing_headers", "401 stale_timestamp", "401 bad_signature"]);
  });

  it("of the library are listed in docs/library.md with their statuses", () => {
    const paragraph = read("docs/library.md")
      .split(/\n\s*\n/)
      .find((p) => p.includes("raises a `CorqError`"));
    expect(paragraph).toBeDefined();
    const listed = Object.fromEntries(
      [...paragraph!.matchAll(/`([a-z_]+)` \((\d{3})\)/g)].map(([, code, status]) => [code, Number(status)]),
    );
    expect(listed).toEqual(statusByCode);
  });
});
