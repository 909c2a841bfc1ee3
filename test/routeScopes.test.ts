// Every route of the Worker states the scope it needs (src/http/auth.ts, requireScope), or is
// one of the few public ones. A route added without a scope fails here — and needs admin
// meanwhile (the API's catch-all) — so least privilege does not depend on remembering it.
// (What each scope may actually do, over HTTP: test/worker/scopes.worker.test.ts.)
import { describe, expect, it } from "vitest";
import { PUBLIC_ROUTES, routeScopes } from "./helpers/routes.js";

describe("route scopes", () => {
  it("every route but the public ones declares exactly one scope; the public ones none", () => {
    const routes = routeScopes();
    expect(routes.size).toBeGreaterThan(20);
    const wrong = [...routes].filter(([route, scopes]) => scopes.length !== (PUBLIC_ROUTES.has(route) ? 0 : 1));
    expect(wrong, "routes without exactly one requireScope (or public routes with one)").toEqual([]);
  });
});
