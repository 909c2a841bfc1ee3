// The Worker on Neon's HTTP path when the endpoint answers with an HTTP status instead of a result
// (issue 48): a compute waking (503 "couldn't connect to compute") or Neon's rate limit (429)
// proves the statement never ran, so even an append is sent again, with backoff, within the
// Worker's retry window (3 s, and the invocation's subrequests) before a 503; a 502 with no
// explanation may have come after the statement ran, so an append is not sent again (a read is);
// every other status (507: a result over Neon's size limit) is a problem that names it, never a
// bare 500. The real Worker in workerd; its HTTP endpoint behind a front that answers chosen
// requests itself (test/helpers/flakyEndpoint.ts).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHttpSqlEndpoint, type HttpSqlEndpoint } from "../../cli/dev/httpSqlEndpoint.js";
import { startFlakyEndpoint } from "../helpers/flakyEndpoint.js";
import { useStack } from "../helpers/stack.js";

const flaky = await startFlakyEndpoint();
const { api, state } = useStack({ vars: { CORQ_NEON_HTTP_ENDPOINT: flaky.url } });
let endpoint: HttpSqlEndpoint;

beforeAll(async () => {
  endpoint = await startHttpSqlEndpoint({ target: state.stack.databaseUrl, poolSize: 4 });
  flaky.forwardTo(endpoint.url);
});
afterAll(async () => {
  await endpoint?.close();
  await flaky.close();
});

// the append's one statement (src/sql/log/appendEvents.ts)
const APPEND = /claim\.version/;
const WAKING = JSON.stringify({ message: "Console request failed: couldn't connect to compute node" });

async function stored(stream: string): Promise<number> {
  const { rows } = await state.db.query("SELECT count(*)::int AS n FROM corq.events WHERE stream = $1", [stream]);
  return rows[0].n;
}

const append = (stream: string) =>
  api("POST", `/streams/${stream}/events`, { body: { events: [{ name: "E", data: {} }] } });

describe("the Worker's statements when Neon's HTTP endpoint answers with a status", () => {
  it.each([
    ["a compute waking (503, couldn't connect to compute), twice", 503, WAKING, "waking"],
    ["Neon's rate limit (429), twice", 429, "rate limited", "limited"],
  ])("%s: the append is sent again and answers 201, stored once", async (_, status, body, stream) => {
    const before = flaky.matched(APPEND);
    flaky.answer({ match: APPEND, status, body, count: 2 });
    const response = await append(stream);
    expect(response.status).toBe(201);
    expect(flaky.matched(APPEND) - before).toBe(3);
    expect(await stored(stream)).toBe(1);
  });

  it("a 502 with no explanation (the statement may have run): the append is not sent again; 503 naming the status", async () => {
    const before = flaky.matched(APPEND);
    flaky.answer({ match: APPEND, status: 502, body: "bad gateway", count: 1 });
    const response = await append("cut");
    expect(response.status).toBe(503);
    expect(response.json).toMatchObject({ type: "urn:corq:problem:database_unavailable" });
    expect(response.json.detail).toMatch(/HTTP 502/);
    expect(flaky.matched(APPEND) - before).toBe(1);
    expect(await append("cut")).toMatchObject({ status: 201 });
    expect(await stored("cut")).toBe(1);
  });

  it("507 (a result over Neon's limit): a 503 problem that names it, not a 500, not sent again", async () => {
    const before = flaky.matched(APPEND);
    flaky.answer({ match: APPEND, status: 507, body: "response is too large (max is 10485760 bytes)", count: 1 });
    const response = await append("large");
    expect(response.status).toBe(503);
    expect(response.json.detail).toMatch(/HTTP 507/);
    expect(flaky.matched(APPEND) - before).toBe(1);
  });

  it("a compute that does not wake: 503 within the retry window (3 s), having tried more than once", async () => {
    const before = flaky.matched(APPEND);
    flaky.answer({ match: APPEND, status: 503, body: WAKING, count: Number.POSITIVE_INFINITY });
    const started = Date.now();
    const response = await append("asleep");
    flaky.answer({ match: /$^/, status: 200, body: "" });
    expect(response.status).toBe(503);
    expect(Date.now() - started).toBeLessThan(3000 + 2000);
    expect(flaky.matched(APPEND) - before).toBeGreaterThan(2);
    expect(await stored("asleep")).toBe(0);
  });
});
