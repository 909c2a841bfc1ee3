// The dashboard's HTTP surface in the real Worker on real Postgres: sessions, actions'
// redirects, response headers. (The pages themselves: test/browser.)
import { describe, expect, it } from "vitest";
import { useStack } from "../helpers/stack.js";

const { state, api } = useStack();

const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();

/** POSTs a dashboard form from the dashboard's own origin; redirects are not followed. */
async function post(path: string, fields: Record<string, string>, cookie?: string) {
  return fetch(`${state.stack.url}${path}`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", origin: state.stack.url, ...(cookie ? { cookie } : {}) },
    body: form(fields),
  });
}

/** Logs in; returns the session cookie as a `cookie` header value. */
async function logIn(token = state.stack.adminToken): Promise<string> {
  const response = await post("/login", { token });
  expect(response.status).toBe(303);
  return response.headers.get("set-cookie")!.split(";")[0];
}

describe("dashboard actions", () => {
  it("come back to a path of this site only: a back link to another host is refused and nothing is done", async () => {
    const cookie = await logIn();
    const offsite = ["/.//evil.example", "/%2e//evil.example", "/..//evil.example", "//evil.example", "/\\evil.example", "/\t/evil.example", "https://evil.example/", "evil.example"];
    for (const back of offsite) {
      const response = await post("/ui/actions/pause", { subscription: "greeter", back }, cookie);
      expect(response.status, back).toBe(400);
      expect(response.headers.get("location"), back).toBeNull();
      expect(await response.text()).toContain("back: must be a path on this site");
    }
    expect((await api("GET", "/subscriptions/greeter")).json.paused).toBe(false);

    const done = await post("/ui/actions/pause", { subscription: "greeter", back: "/ui/dead-letters?subscription=greeter" }, cookie);
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toBe("/ui/dead-letters?subscription=greeter&done=pause&count=0&of=greeter");
    expect((await api("GET", "/subscriptions/greeter")).json.paused).toBe(true);
    await api("POST", "/subscriptions/greeter/resume");
  });
});

describe("dashboard sessions", () => {
  const page = (cookie: string) => fetch(`${state.stack.url}/ui/dead-letters`, { headers: { cookie }, redirect: "manual" });

  it("logout ends that session only: its cookie, replayed, is refused; another session goes on", async () => {
    const first = await logIn();
    const second = await logIn();
    expect((await page(first)).status).toBe(200);
    const out = await post("/logout", {}, first);
    expect(out.status).toBe(303);
    expect(out.headers.get("location")).toBe("/login");

    const replayed = await page(first);
    expect(replayed.status).toBe(302);
    expect(replayed.headers.get("location")).toBe("/login");
    expect((await post("/ui/actions/pause", { subscription: "greeter", back: "/" }, first)).status).toBe(401);
    expect((await api("GET", "/subscriptions/greeter")).json.paused).toBe(false);
    expect((await page(second)).status).toBe(200);
  });
});
