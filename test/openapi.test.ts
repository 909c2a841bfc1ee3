// The OpenAPI document (src/http/openapi.ts) against the app itself: every route the app
// answers is described (and nothing it does not answer), and docs/openapi.json is current.
import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { createApi } from "../src/http/api.js";
import { createAuthThrottle } from "../src/http/authThrottle.js";
import { dashboard } from "../src/http/dashboard/routes.js";
import { apiRoutes } from "../src/http/apiRoutes.js";
import { openApiDocument } from "../src/http/openapi.js";
import { openCorq } from "../functions/database.js";

const routesOf = (app: { routes: { method: string; path: string }[] }) =>
  new Set(app.routes.filter((r) => r.method !== "ALL").map((r) => `${r.method} ${r.path}`));

describe("OpenAPI", () => {
  it("describes exactly the routes of the API (the dashboard's HTML pages aside)", () => {
    const html = routesOf(dashboard({ throttle: createAuthThrottle() }));
    const answered = [...routesOf(createApi({ subscriptions: [], open: openCorq }))]
      .filter((route) => !html.has(route))
      .sort();
    const described = apiRoutes.map((r) => `${r.method.toUpperCase()} ${r.path}`).sort();
    // a route added to api.ts without an entry in src/http/openapi.ts fails here
    expect(described).toEqual(answered);
    expect(answered.length).toBeGreaterThan(15);
  });

  it("docs/openapi.json is the current document (npm run openapi writes it)", () => {
    const committed = JSON.parse(readFileSync(new URL("../docs/openapi.json", import.meta.url), "utf8"));
    expect(committed).toEqual(openApiDocument());
  });

  it("is OpenAPI 3.1 with a path parameter for every {name} in a path, and problem+json for refusals", () => {
    const document = openApiDocument() as {
      openapi: string;
      paths: Record<
        string,
        Record<string, { parameters: { in: string; name: string }[]; responses: Record<string, unknown> }>
      >;
    };
    expect(document.openapi).toBe("3.1.0");
    const manifest = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
    expect((document as unknown as { info: { version: string } }).info.version).toBe(manifest.version);
    for (const [path, operations] of Object.entries(document.paths)) {
      const names = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      for (const [method, operation] of Object.entries(operations)) {
        const declared = operation.parameters.filter((p) => p.in === "path").map((p) => p.name);
        expect({ path, method, params: declared }).toEqual({ path, method, params: names });
        for (const [status, answer] of Object.entries(operation.responses)) {
          const types = Object.keys((answer as { content?: object }).content ?? {});
          if (Number(status) >= 400)
            expect({ path, status, types }).toEqual({ path, status, types: ["application/problem+json"] });
        }
      }
    }
  });
});
