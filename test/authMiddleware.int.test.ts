// The API's catch-all (src/http/auth.ts `authenticate`) on a bare Hono app and real Postgres:
// default deny — a route that states no scope needs admin, whatever token calls it.
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { authenticate, requireScope } from "../src/http/auth.js";
import { createAuthThrottle } from "../src/http/authThrottle.js";
import { onError } from "../src/http/problem.js";
import { useCorq } from "./helpers/corq.js";
import type { AppEnv } from "../src/http/types.js";

const open = useCorq();
const ADMIN = "an-admin-token-of-at-least-32-characters";

describe("the API's catch-all", () => {
  it("a route without requireScope needs admin; one with it, its scope; a path without a route, any valid token", async () => {
    const { corq } = await open();
    const app = new Hono<AppEnv>();
    app.onError(onError);
    const throttle = createAuthThrottle();
    app.use("*", async (c, next) => {
      c.set("throttle", throttle);
      c.set("corq", () => corq);
      await next();
    });
    app.use("*", authenticate());
    app.get("/declared", requireScope("read"), (c) => c.text("ran"));
    app.get("/undeclared", (c) => c.text("ran"));
    const get = async (path: string, token: string) => {
      const response = await app.request(
        path,
        { headers: { authorization: `Bearer ${token}` } },
        { CORQ_ADMIN_TOKEN: ADMIN },
      );
      return { status: response.status, body: await response.text() };
    };

    const { token: read } = await corq.createToken({ name: "reader", scopes: ["read"] });
    const { token: operate } = await corq.createToken({ name: "operator", scopes: ["operate"] });
    expect(await get("/declared", read)).toEqual({ status: 200, body: "ran" });
    for (const token of [read, operate]) {
      const refused = await get("/undeclared", token);
      expect(refused.status).toBe(403);
      expect(JSON.parse(refused.body)).toMatchObject({ type: "urn:corq:problem:forbidden" });
    }
    expect(await get("/undeclared", ADMIN)).toEqual({ status: 200, body: "ran" });
    expect((await get("/nowhere", read)).status).toBe(404);
    expect((await get("/nowhere", "wrong")).status).toBe(401);
  });
});
