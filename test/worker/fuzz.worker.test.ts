// Fuzzed input at the HTTP boundary: random JSON bodies, random path segments, random content
// types. Always a 4xx problem+json for a client's mistake, never a 5xx, and nothing written.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { useStack } from "../helpers/stack.js";

const { state, api } = useStack();

const counts = async () =>
  (await state.db.query("SELECT (SELECT count(*) FROM corq.events)::int AS events, (SELECT count(*) FROM corq.subscriptions WHERE kind = 'push')::int AS push")).rows[0];

const segment = fc.oneof(fc.string(), fc.constantFrom("..", "%2e%2e", "a/b", "x%00y", "'; DROP TABLE corq.events; --", "é", " "));

describe("fuzzed HTTP input", () => {
  it("append, subscription PUT and the webhook answer 4xx problem+json and write nothing", async () => {
    const before = await counts();
    let acceptedEvents = 0;
    let createdPush = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("append", "put", "retry"),
        segment,
        fc.oneof(
          fc.jsonValue(),
          fc.record({ events: fc.array(fc.record({ name: fc.string(), data: fc.jsonValue() }), { maxLength: 3 }) }),
          fc.record({ deliver: fc.record({ url: fc.string() }), batchSize: fc.jsonValue() }),
          fc.string(),
        ),
        fc.constantFrom("application/json", "text/plain", "application/x-www-form-urlencoded"),
        async (route, name, body, type) => {
          // a well-formed append would be accepted: keep only inputs that break a rule
          const path = route === "append" ? `/streams/${encodeURIComponent(name)}/events` : route === "put" ? `/subscriptions/${encodeURIComponent(name)}` : "/dead-letters/retry";
          const response = await api(route === "put" ? "PUT" : "POST", path, {
            body: typeof body === "string" ? body : JSON.stringify(body),
            headers: { "content-type": type },
          });
          if (response.status < 300) {
            // a valid input by chance: count what it may have written
            if (route === "append") acceptedEvents += response.json.positions.length;
            if (route === "put" && response.status === 201) createdPush++;
            return;
          }
          expect(response.status, `${route} ${name} ${JSON.stringify(body)}`).toBeGreaterThanOrEqual(400);
          expect(response.status).toBeLessThan(500);
          expect(response.type).toContain("application/problem+json");
          expect(response.json).toMatchObject({ type: expect.any(String), title: expect.any(String), status: response.status, detail: expect.any(String) });
        },
      ),
      { numRuns: 150 },
    );
    // only the requests that were accepted wrote anything
    expect(await counts()).toEqual({ events: before.events + acceptedEvents, push: before.push + createdPush });
  });
});
