// The OpenAPI 3.1 description of the HTTP API (GET /openapi.json, docs/openapi.json), made
// from the table of the routes (apiRoutes.ts) and the zod schemas api.ts validates with
// (apiSchemas.ts), by zod's own JSON Schema conversion. test/openapi.test.ts fails when a route of the app is
// missing here (or one here is not in the app) and when docs/openapi.json is stale
// (`npm run openapi` writes it).
import { z } from "zod";
import * as s from "./apiSchemas.js";
import { apiRoutes, type ApiRoute } from "./apiRoutes.js";

/** JSON Schema 2020-12 (OpenAPI 3.1's dialect) of a zod schema; requests as sent, answers as sent back. */
function jsonSchema(schema: z.ZodType, io: "input" | "output"): Record<string, unknown> {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, {
    io,
    target: "draft-2020-12",
    unrepresentable: "any",
  }) as Record<string, unknown>;
  return rest;
}

const problemRef = { $ref: "#/components/schemas/Problem" };
const problemAnswer = (description: string) => ({
  description,
  content: { "application/problem+json": { schema: problemRef } },
});

function parameters(where: "path" | "query" | "header", shape: z.ZodObject | undefined) {
  if (!shape) return [];
  return Object.entries(shape.shape).map(([name, field]) => {
    const schema = jsonSchema(field as z.ZodType, "input");
    const { description, ...rest } = schema;
    return {
      name,
      in: where,
      required: where === "path" || !(field as z.ZodType).safeParse(undefined).success,
      ...(description ? { description } : {}),
      schema: rest,
    };
  });
}

function operation(route: ApiRoute) {
  const responses: Record<string, unknown> = {};
  for (const [status, answer] of Object.entries(route.answers)) {
    const type = answer.type ?? (Number(status) >= 400 ? "application/problem+json" : "application/json");
    responses[status] = answer.schema
      ? {
          description: answer.description,
          content: {
            [type]: { schema: answer.schema === s.problem ? problemRef : jsonSchema(answer.schema, "output") },
          },
        }
      : { description: answer.description };
  }
  // refusals every route of its kind can answer
  const hasInput = route.params || route.query || route.headers || route.body;
  if (hasInput) responses["400"] ??= problemAnswer("invalid input; `errors` lists each field refused");
  if (route.access !== "public") {
    responses["401"] ??= problemAnswer("no token, a wrong or revoked one, or a bad webhook signature");
    responses["403"] ??= problemAnswer(
      route.access === "append"
        ? "the token has no append scope, or the stream is outside its streamPrefix"
        : `the token has no ${route.access.split(" ")[0]} scope`,
    );
    responses["429"] ??= problemAnswer("too many failed authentications from this client; Retry-After");
  }
  if (route.body) {
    responses["413"] ??= problemAnswer("the body is over CORQ_MAX_BODY_BYTES");
    responses["415"] ??= problemAnswer("the body is not application/json");
  }
  if (route.path !== "/openapi.json") responses["503"] ??= problemAnswer("the database is unavailable; try again");
  // the scope goes in the bearer requirement (OpenAPI 3.1 allows roles for http schemes);
  // `{}`: CORQ_PUBLIC_APPEND=true lets anyone append
  const scope = route.access.split(" ")[0] as string;
  const security =
    route.access === "public"
      ? []
      : route.access === "append"
        ? [{ bearer: [scope] }, {}]
        : route.access === "operate or signature"
          ? [{ bearer: [scope] }, { webhookSignature: [] }]
          : [{ bearer: [scope] }];
  return {
    operationId: operationId(route),
    summary: route.summary,
    tags: [route.tag],
    ...(security.length > 0 ? { security } : { security: [] }),
    parameters: [
      ...parameters("path", route.params),
      ...parameters("query", route.query),
      ...parameters("header", route.headers),
    ],
    ...(route.body
      ? {
          requestBody: { required: true, content: { "application/json": { schema: jsonSchema(route.body, "input") } } },
        }
      : {}),
    responses: Object.fromEntries(Object.entries(responses).sort(([a], [b]) => Number(a) - Number(b))),
  };
}

/** `post /subscriptions/:name/pause` → `postSubscriptionsNamePause`. */
function operationId(route: ApiRoute): string {
  const words = route.path.split(/[/:.-]+/).filter(Boolean);
  return route.method + words.map((w) => w[0]?.toUpperCase() + w.slice(1)).join("");
}

/**
 * The OpenAPI document. `basePath` (the app mounted under a prefix, src/http/basePath.ts): a
 * relative `servers` URL, so the paths below stay the API's own and a client resolves them
 * under the prefix.
 */
export function openApiDocument(options: { basePath?: string } = {}): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of apiRoutes) {
    const path = route.path.replace(/:(\w+)/g, "{$1}");
    paths[path] ??= {};
    paths[path][route.method] = operation(route);
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "corq",
      version: "0.1.0",
      description:
        "Correlated queues on a Postgres event log. Every refusal is application/problem+json " +
        "(RFC 9457) with a `type` of `urn:corq:problem:<code>`; `errors` is an array of " +
        "`{ path, message }` when the refusal is about fields (query fields named as sent). A " +
        "known path with another method answers 405 with `Allow`. See docs/http-api.md.",
    },
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    ...(options.basePath ? { servers: [{ url: options.basePath }] } : {}),
    tags: ["health", "log", "subscriptions", "dead letters", "pipeline", "tokens", "retention", "alerts"].map(
      (name) => ({ name }),
    ),
    paths,
    // what corq itself POSTs: an alert to its url (docs/operations.md, "Alerts")
    webhooks: {
      alert: {
        post: {
          summary:
            "An alert (PUT /alerts/:name): Standard Webhooks-signed (webhook-id, webhook-timestamp, webhook-signature with the alert's secret); a 2xx takes it, anything else is retried",
          tags: ["alerts"],
          requestBody: {
            required: true,
            content: { "application/json": { schema: jsonSchema(s.alertPayload, "output") } },
          },
          responses: { "200": { description: "taken (any 2xx)" } },
        },
      },
    },
    components: {
      schemas: { Problem: jsonSchema(s.problem, "output") },
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description:
            "CORQ_ADMIN_TOKEN (every scope) or a token from POST /tokens; the scope a route needs is its requirement's role: append, read, operate (includes read) or admin (everything). An append token with a streamPrefix appends only to streams that start with it, and still makes every handler run whose subscription takes its events (their names and a subscription's `streams` prefixes)",
        },
        webhookSignature: {
          type: "apiKey",
          in: "header",
          name: "webhook-signature",
          description:
            "Standard Webhooks: webhook-id, webhook-timestamp and webhook-signature made with CORQ_WEBHOOK_SECRET",
        },
      },
    },
  };
}
