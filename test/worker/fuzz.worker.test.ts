// Fuzzed input at the HTTP boundary: random JSON bodies, random path segments, random content
// types. Always a 4xx problem+json for a client's mistake, never a 5xx, and nothing written.
import { afterAll, describe, expect, it } from "vitest";
import fc from "fast-check";
import { useStack } from "../helpers/stack.js";
import { reportScenario } from "../helpers/chaos.js";

const { state, api } = useStack({ vars: { CORQ_MAX_BODY_BYTES: "40000" } });
const report = { requests: 0 };
afterAll(() =>
  reportScenario({
    scenario: "bad input",
    events: 0,
    lost: 0,
    order: 0,
    doubleClaims: 0,
    dup: 0,
    notes: { requests: report.requests },
  }),
);

const counts = async () =>
  (
    await state.db.query(
      "SELECT (SELECT count(*) FROM corq.events)::int AS events, (SELECT count(*) FROM corq.subscriptions WHERE kind = 'push')::int AS push, (SELECT count(*) FROM corq.tokens)::int AS tokens",
    )
  ).rows[0];

const segment = fc.oneof(
  fc.string(),
  fc.constantFrom("..", "%2e%2e", "a/b", "x%00y", "'; DROP TABLE corq.events; --", "é", " "),
);

describe("fuzzed HTTP input", () => {
  it("append, subscription PUT, token POST and the webhook answer 4xx problem+json and write nothing", async () => {
    const before = await counts();
    let acceptedEvents = 0;
    let createdPush = 0;
    let createdTokens = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("append", "put", "retry", "token", "rewind"),
        segment,
        fc.oneof(
          fc.jsonValue(),
          fc.record({ events: fc.array(fc.record({ name: fc.string(), data: fc.jsonValue() }), { maxLength: 3 }) }),
          fc.record({ deliver: fc.record({ url: fc.string() }), batchSize: fc.jsonValue() }),
          fc.record(
            {
              name: fc.string(),
              scopes: fc.array(fc.oneof(fc.constantFrom("append", "read", "operate", "admin"), fc.string())),
              streamPrefix: fc.oneof(fc.string(), fc.constant(null)),
            },
            { requiredKeys: [] },
          ),
          fc.string(),
        ),
        fc.constantFrom("application/json", "text/plain", "application/x-www-form-urlencoded"),
        async (route, name, body, type) => {
          // a well-formed append would be accepted: keep only inputs that break a rule
          const path =
            route === "append"
              ? `/streams/${encodeURIComponent(name)}/events`
              : route === "put"
                ? `/subscriptions/${encodeURIComponent(name)}`
                : route === "token"
                  ? "/tokens"
                  : route === "rewind"
                    ? `/subscriptions/${encodeURIComponent(name)}/rewind`
                    : "/dead-letters/retry";
          const response = await api(route === "put" ? "PUT" : "POST", path, {
            body: typeof body === "string" ? body : JSON.stringify(body),
            headers: { "content-type": type },
          });
          // ".." collapses the URL to the dashboard's "/" before it leaves the client: not an API request
          expect(response.status).toBeLessThan(500);
          if (new URL(path, state.stack.url).pathname === "/") return;
          if (response.status < 300) {
            // a valid input by chance: count what it may have written
            if (route === "append") acceptedEvents += response.json.positions.length;
            if (route === "put" && response.status === 201) createdPush++;
            if (route === "token") createdTokens++;
            return;
          }
          expect(response.status, `${route} ${name} ${JSON.stringify(body)}`).toBeGreaterThanOrEqual(400);
          expect(response.status).toBeLessThan(500);
          expect(response.type).toContain("application/problem+json");
          expect(response.json).toMatchObject({
            type: expect.any(String),
            title: expect.any(String),
            status: response.status,
            detail: expect.any(String),
          });
        },
      ),
      { numRuns: 150 },
    );
    // only the requests that were accepted wrote anything
    expect(await counts()).toEqual({
      events: before.events + acceptedEvents,
      push: before.push + createdPush,
      tokens: before.tokens + createdTokens,
    });
    report.requests += 150;
  });
});

/** Everything a request could change: the log, subscriptions (settings, pause), keys, queue, dead letters. */
const fingerprint = async () =>
  (
    await state.db.query(`SELECT
      (SELECT count(*) FROM corq.events)::int AS events,
      (SELECT md5(coalesce(string_agg(name || paused || batch_size || key || array_to_string(events, ','), '|' ORDER BY name), '')) FROM corq.subscriptions) AS subscriptions,
      (SELECT count(*) FROM corq.queue)::int AS queued,
      (SELECT count(*) FROM corq.keys WHERE dead_at IS NOT NULL)::int AS dead,
      (SELECT count(*) FROM corq.keys WHERE paused_at IS NOT NULL)::int AS paused_keys,
      (SELECT coalesce(max(seq), 0) FROM corq.keys)::int AS seq,
      (SELECT count(*) FROM corq.webhook_ids)::int AS webhooks,
      (SELECT count(*) FROM corq.tokens)::int AS tokens`)
  ).rows[0];

const routes: [method: string, path: (s: string) => string][] = [
  ["GET", (s) => `/streams/${s}`],
  ["GET", (s) => `/streams/ok?from=${s}&limit=${s}`],
  ["GET", (s) => `/events?after=${s}&limit=${s}`],
  ["GET", (s) => `/subscriptions/${s}`],
  ["DELETE", (s) => `/subscriptions/${s}`],
  ["GET", (s) => `/subscriptions/${s}/keys`],
  ["GET", (s) => `/subscriptions/greeter/keys?status=${s}&limit=${s}&after=${s}`],
  ["POST", (s) => `/subscriptions/${s}/pause`],
  ["POST", (s) => `/subscriptions/${s}/resume`],
  ["POST", (s) => `/subscriptions/${s}/rewind`],
  ["POST", (s) => `/subscriptions/missing/keys/${s}/pause`],
  ["POST", (s) => `/subscriptions/greeter/keys/${s}/resume`],
  ["POST", (s) => `/consume/${s}`],
  ["GET", (s) => `/dead-letters?subscription=${s}&limit=${s}`],
  ["DELETE", (s) => `/tokens/${s}`],
];

describe("fuzzed paths and queries at every endpoint", () => {
  it("answer 4xx problem+json for names and numbers that break a rule, and change nothing", async () => {
    const before = await fingerprint();
    let requests = 0;
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...routes), segment, async ([method, path], raw) => {
        requests++;
        const url = path(encodeURIComponent(raw));
        const response = await api(method, url, { headers: { "corq-budget-ms": raw.slice(0, 20) || "x" } });
        expect(response.status, `${method} ${url}`).toBeLessThan(500);
        if (new URL(url, state.stack.url).pathname === "/") return; // ".." collapsed it to the dashboard
        if (response.status >= 400) {
          expect(response.type).toContain("application/problem+json");
          expect(response.json.status).toBe(response.status);
        }
      }),
      { numRuns: 200 },
    );
    expect(await fingerprint()).toEqual(before);
    report.requests += requests;
  });

  it("refuses huge payloads with 413 and wrong content types with 415, at every body-taking endpoint", async () => {
    const before = await fingerprint();
    const huge = JSON.stringify({ events: [{ name: "E", data: { blob: "x".repeat(50_000) } }] }); // the stack's limit is 40,000 bytes
    for (const [method, path] of [
      ["POST", "/streams/big/events"],
      ["PUT", "/subscriptions/big"],
      ["POST", "/dead-letters/retry"],
      ["POST", "/subscriptions/greeter/rewind"],
      ["POST", "/tokens"],
    ] as const) {
      const tooBig = await api(method, path, { body: huge });
      expect(tooBig.status, `${method} ${path}`).toBe(413);
      expect(tooBig.type).toContain("application/problem+json");
      const wrongType = await api(method, path, { body: "{}", headers: { "content-type": "text/csv" } });
      expect(wrongType.status, `${method} ${path}`).toBe(415);
      report.requests += 2;
    }
    const form = await fetch(`${state.stack.url}/login`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: state.stack.url },
      body: `token=${"x".repeat(50_000)}`,
    });
    expect(form.status).toBe(413);
    report.requests += 1;
    expect(await fingerprint()).toEqual(before);
  });
});
