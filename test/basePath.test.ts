// basePath (src/http/basePath.ts): what a prefix may be, refused where the Worker is made; the
// app under it routes the rest of the path and says so when handed a path outside it.
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { createWorker } from "../functions/createWorker.js";
import { openCorq } from "../functions/database.js";
import { parseBasePath } from "../src/http/basePath.js";
import { createApi } from "../src/http/api.js";
import { CorqError } from "../src/errors.js";

const env = { CORQ_ADMIN_TOKEN: "x".repeat(32) };

describe("basePath", () => {
  it("is the root for undefined, '' and '/', and a prefix of unreserved segments otherwise", () => {
    for (const root of [undefined, "", "/"]) expect(parseBasePath(root)).toBe("");
    for (const good of ["/corq", "/ops/queues", "/a-b_c~d.e", "/v1/..x"]) expect(parseBasePath(good)).toBe(good);
  });

  it("refuses, at createWorker, what is not one (the Worker fails at module evaluation, not at a request)", () => {
    const bad = [
      "corq",
      "/corq/",
      "//corq",
      "/corq//x",
      "/..",
      "/corq/../admin",
      "/./corq",
      "/corq?x=1",
      "/corq#top",
      "/co rq",
      "/c%6Frq",
      "/corq\\x",
      "https://host/corq",
      `/${"a".repeat(200)}`,
      42,
    ];
    for (const basePath of bad) {
      expect(() => createWorker({ subscriptions: [], basePath: basePath as string }), String(basePath)).toThrow(
        expect.objectContaining({ code: "invalid_config", message: expect.stringMatching(/^basePath: /) }),
      );
      expect(() => parseBasePath(basePath)).toThrow(CorqError);
    }
  });

  it("routes the path under the prefix and refuses one outside it with a 404 naming the prefix", async () => {
    const api = createApi({ subscriptions: [], open: openCorq, basePath: "/corq" });
    const openapi = await api.request("http://127.0.0.1/corq/openapi.json", {}, env);
    expect(openapi.status).toBe(200);
    expect((await openapi.json()).servers).toEqual([{ url: "/corq" }]);
    // what Hono's app.mount hands over by default: the prefix stripped
    for (const path of ["/openapi.json", "/corqx/openapi.json", "/"]) {
      const outside = await api.request(`http://127.0.0.1${path}`, {}, env);
      expect(outside.status, path).toBe(404);
      expect(outside.headers.get("content-type")).toBe("application/problem+json");
      expect((await outside.json()).detail).toMatch(/corq is mounted at \/corq: .* is outside it/);
    }
    // the root app has no servers entry (the committed docs/openapi.json is the root's)
    const root = await createApi({ subscriptions: [], open: openCorq }).request(
      "http://127.0.0.1/openapi.json",
      {},
      env,
    );
    expect((await root.json()).servers).toBeUndefined();
  });

  it("is reached through a user's Hono app by app.all or app.mount without stripping; app.mount's default strips", async () => {
    const corq = createApi({ subscriptions: [], open: openCorq, basePath: "/corq" });
    const user = new Hono<{ Bindings: typeof env }>();
    user.get("/", (c) => c.text("my app"));
    user.all("/corq/*", (c) => corq.fetch(c.req.raw, c.env));
    user.mount("/whole", corq.fetch, { replaceRequest: false });
    user.mount("/stripped", corq.fetch);
    expect(await (await user.request("http://127.0.0.1/", {}, env)).text()).toBe("my app");
    expect((await user.request("http://127.0.0.1/corq/openapi.json", {}, env)).status).toBe(200);
    // the whole path of /whole/openapi.json is outside /corq: only its own prefix is corq's
    expect((await user.request("http://127.0.0.1/whole/openapi.json", {}, env)).status).toBe(404);
    const whole = createApi({ subscriptions: [], open: openCorq, basePath: "/whole" });
    const other = new Hono();
    other.mount("/whole", whole.fetch, { replaceRequest: false });
    expect((await other.request("http://127.0.0.1/whole/openapi.json", {}, env)).status).toBe(200);
    const stripped = await user.request("http://127.0.0.1/stripped/openapi.json", {}, env);
    expect(stripped.status).toBe(404);
    expect((await stripped.json()).detail).toMatch(/^corq is mounted at \/corq: \/openapi.json is outside it/);
  });

  it("renders the login page with every link, asset and form under the prefix", async () => {
    const api = createApi({ subscriptions: [], open: openCorq, basePath: "/ops/corq" });
    for (const path of ["/ops/corq/login", "/ops/corq/"]) {
      const response = await api.request(`http://127.0.0.1${path}`, { redirect: "manual" }, env);
      if (response.status === 302) {
        expect(response.headers.get("location")).toBe("/ops/corq/login");
        continue;
      }
      expect(response.status).toBe(200);
      const urls = [...(await response.text()).matchAll(/\s(?:href|src|action)="([^"]*)"/g)].map((m) => m[1]);
      expect(urls.length).toBeGreaterThan(0);
      for (const url of urls) expect(url).toMatch(/^\/ops\/corq\//);
    }
  });
});
