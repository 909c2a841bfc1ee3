// The API's body limit (CORQ_MAX_BODY_BYTES) holds whether the client declares the length or
// sends the body chunked: a declared length is checked from the header, a chunked body is
// counted as it is read (hono's bodyLimit). A body within the limit goes on to authentication.
import { describe, expect, it } from "vitest";
import { createApi } from "../src/http/api.js";
import type { Env } from "../src/http/types.js";
import { openCorq } from "../functions/database.js";

const env: Env = { CORQ_MAX_BODY_BYTES: "1000", CORQ_ADMIN_TOKEN: "body-limit-test-admin-token-0123456789" };
const api = createApi({ subscriptions: [], open: openCorq });
const ctx = { waitUntil: () => undefined, passThroughOnException: () => undefined, props: {} };

const post = (body: string, chunked: boolean) => {
  const bytes = new TextEncoder().encode(body);
  const init: RequestInit & { duplex?: "half" } = chunked
    ? {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: new ReadableStream({
          start(controller) {
            for (let i = 0; i < bytes.length; i += 100) controller.enqueue(bytes.slice(i, i + 100));
            controller.close();
          },
        }),
        duplex: "half",
      }
    : { method: "POST", headers: { "content-type": "application/json", "content-length": String(bytes.length) }, body };
  return api.fetch(new Request("http://127.0.0.1/streams/s/events", init), env, ctx);
};

const body = (size: number) => JSON.stringify({ events: [{ name: "E", data: "x".repeat(size - 35) }] });

describe("the body limit", () => {
  it("refuses a body over the limit with 413, declared or chunked; lets one within it through", async () => {
    expect(body(1001)).toHaveLength(1001);
    const statuses = [];
    for (const chunked of [false, true]) {
      for (const size of [1001, 1000]) statuses.push((await post(body(size), chunked)).status);
    }
    // within the limit: on to authentication (no token: 401)
    expect(statuses).toEqual([413, 401, 413, 401]);
    const refused = await post(body(5000), true);
    expect(refused.headers.get("content-type")).toMatch(/^application\/problem\+json/);
  });
});
