// Failed authentication is throttled per client (src/http/authThrottle.ts): after 5 failures
// (this stack's limit) within 5 s of the first, that client gets 429 + Retry-After on every
// authenticated request, right credentials or not, until the window is over. Each test is
// another client (CF-Connecting-IP, which the local dev server lets a client set).
import { describe, expect, it } from "vitest";
import { sign } from "../../src/webhookSignature.js";
import { sleep } from "../helpers/corq.js";
import { useStack } from "../helpers/stack.js";

const LIMIT = 5;
const { state, api } = useStack({ vars: { CORQ_AUTH_FAILURE_LIMIT: String(LIMIT), CORQ_AUTH_FAILURE_WINDOW_S: "5" } });

const from = (ip: string) => ({ "cf-connecting-ip": ip });

function expectTooMany(response: { status: number; type: string; json: any }) {
  expect(response.status).toBe(429);
  expect(response.type).toContain("application/problem+json");
  expect(response.json).toMatchObject({
    type: "urn:corq:problem:too_many_failed_authentications",
    status: 429,
    title: "Too Many Requests",
  });
}

describe("failed authentication is throttled per client", () => {
  it("100 wrong bearer tokens: 5 are answered 401, the rest 429; then even the right token waits; other clients do not", async () => {
    const client = from("203.0.113.1");
    const statuses: number[] = [];
    for (let i = 0; i < 100; i++)
      statuses.push((await api("GET", "/stats", { token: `guess-${i}`, headers: client })).status);
    expect(statuses.slice(0, LIMIT)).toEqual(Array(LIMIT).fill(401));
    expect(statuses.slice(LIMIT)).toEqual(Array(100 - LIMIT).fill(429));

    const blocked = await fetch(`${state.stack.url}/stats`, {
      headers: { ...client, authorization: `Bearer ${state.stack.adminToken}` },
    });
    expect(blocked.status).toBe(429);
    const retryAfter = Number(blocked.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(5);
    expect(blocked.headers.get("content-type")).toContain("application/problem+json");
    expectTooMany(await api("GET", "/stats", { token: null, headers: client }));
    expectTooMany(
      await api("POST", "/streams/s/events", { headers: client, body: { events: [{ name: "E", data: {} }] } }),
    );

    // another client is not held up
    expect((await api("GET", "/stats", { headers: from("203.0.113.2") })).status).toBe(200);
    expect((await api("GET", "/stats", { token: "wrong", headers: from("203.0.113.2") })).status).toBe(401);
    // and /health wants no credentials
    expect((await api("GET", "/health", { token: null, headers: client })).status).toBe(200);

    // once the window is over, the client is heard again
    await sleep(retryAfter * 1000 + 100);
    expect((await api("GET", "/stats", { headers: client })).status).toBe(200);
    expect((await api("GET", "/stats", { token: "wrong", headers: client })).status).toBe(401);
  }, 30_000);

  it("requests without credentials are not counted", async () => {
    const client = from("203.0.113.3");
    for (let i = 0; i < 3 * LIMIT; i++)
      expect((await api("GET", "/stats", { token: null, headers: client })).status).toBe(401);
    expect((await api("GET", "/stats", { headers: client })).status).toBe(200);
  });

  it("bad webhook signatures count too; once blocked, a good one waits", async () => {
    const client = from("203.0.113.4");
    const body = JSON.stringify({ subscription: "greeter" });
    const timestamp = Math.floor(Date.now() / 1000);
    const signed = async (secret: string, id: string) => ({
      ...client,
      "webhook-id": id,
      "webhook-timestamp": String(timestamp),
      "webhook-signature": await sign(secret, { id, timestamp, body }),
    });
    for (let i = 0; i < LIMIT; i++) {
      expect(
        (
          await api("POST", "/dead-letters/retry", {
            token: null,
            body,
            headers: await signed("wrong-secret", `msg_${i}`),
          })
        ).status,
      ).toBe(401);
    }
    expectTooMany(
      await api("POST", "/dead-letters/retry", {
        token: null,
        body,
        headers: await signed(state.stack.webhookSecret, "msg_good"),
      }),
    );
    // the same good request from another client goes through
    const good = await signed(state.stack.webhookSecret, "msg_good");
    expect(
      await api("POST", "/dead-letters/retry", { token: null, body, headers: { ...good, ...from("203.0.113.5") } }),
    ).toMatchObject({
      status: 200,
      json: { released: 0 },
    });
  });

  it("wrong dashboard logins count too: the login page answers 429 with Retry-After, and no session even for the right token", async () => {
    const login = (token: string) =>
      fetch(`${state.stack.url}/login`, {
        method: "POST",
        redirect: "manual",
        headers: {
          ...from("203.0.113.6"),
          "content-type": "application/x-www-form-urlencoded",
          origin: state.stack.url,
        },
        body: new URLSearchParams({ token }).toString(),
      });
    for (let i = 0; i < LIMIT; i++) expect((await login(`guess-${i}`)).status).toBe(401);
    const refused = await login(state.stack.adminToken);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(refused.headers.get("set-cookie")).toBeNull();
    expect(await refused.text()).toContain("Too many failed logins");
  });
});
