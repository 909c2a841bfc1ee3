import { createApi } from "../../src/http/api.js";
import { openCorq } from "../../functions/database.js";
import { declaredScope } from "../../src/http/auth.js";

/** Routes that need no token and no session (the dashboard's login and its static files). */
export const PUBLIC_ROUTES = new Set([
  "GET /health",
  "GET /openapi.json",
  "GET /login",
  "POST /login",
  "POST /logout",
  "GET /favicon.ico",
  "GET /assets/corq.css",
  "GET /assets/corq.js",
]);

/** The dashboard's routes (a session cookie instead of the bearer token). */
export const isDashboardRoute = (route: string) => /^(GET \/|GET \/ui\/.*|POST \/ui\/.*)$/.test(route);

/**
 * `METHOD path` → the scopes its handlers declare (src/http/auth.ts requireScope), for every
 * route of the Worker's app (middleware for all methods aside).
 */
export function routeScopes(): Map<string, string[]> {
  const routes = new Map<string, string[]>();
  for (const { method, path, handler } of createApi({ subscriptions: [], open: openCorq }).routes) {
    if (method === "ALL") continue;
    const route = `${method} ${path}`;
    const scopes = routes.get(route) ?? [];
    const scope = declaredScope(handler);
    if (scope) scopes.push(scope);
    routes.set(route, scopes);
  }
  return routes;
}
