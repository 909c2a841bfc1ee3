// Every route of the Worker states the scope it needs (functions/auth.ts, requireScope), or is
// one of the few public ones. A route added without a scope fails here — and is refused by
// the API's catch-all meanwhile — so least privilege does not depend on remembering it.
// (What each scope may actually do, over HTTP: test/worker/scopes.worker.test.ts.)
import { describe, expect, it } from "vitest";
import { createApi } from "../functions/api.js";
import { declaredScope } from "../functions/auth.js";

/** Routes that need no token and no session (the dashboard's login and its static files). */
const PUBLIC = new Set([
  "GET /health",
  "GET /openapi.json",
  "GET /login",
  "POST /login",
  "POST /logout",
  "GET /favicon.ico",
  "GET /assets/corq.css",
  "GET /assets/corq.js",
]);

/** `METHOD path` → the scopes its handlers declare, for every route of the app (middleware for all methods aside). */
export function routeScopes(): Map<string, string[]> {
  const routes = new Map<string, string[]>();
  for (const { method, path, handler } of createApi([]).routes) {
    if (method === "ALL") continue;
    const route = `${method} ${path}`;
    const scopes = routes.get(route) ?? [];
    const scope = declaredScope(handler);
    if (scope) scopes.push(scope);
    routes.set(route, scopes);
  }
  return routes;
}

describe("route scopes", () => {
  it("every route but the public ones declares exactly one scope; the public ones none", () => {
    const routes = routeScopes();
    expect(routes.size).toBeGreaterThan(20);
    const wrong = [...routes].filter(([route, scopes]) => scopes.length !== (PUBLIC.has(route) ? 0 : 1));
    expect(wrong, "routes without exactly one requireScope (or public routes with one)").toEqual([]);
  });
});
