// Every error leaves the API as application/problem+json (RFC 9457): type, title, status, detail.
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import { CorqError, isDatabaseUnavailable, toError } from "../errors.js";
import { requestOrigin } from "./requestClient.js";

const titles: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  413: "Payload Too Large",
  415: "Unsupported Media Type",
  422: "Unprocessable Content",
  421: "Misdirected Request",
  429: "Too Many Requests",
  500: "Internal Server Error",
  503: "Service Unavailable",
};

export function problem(
  status: number,
  code: string,
  detail: string,
  extra: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): Response {
  return new Response(
    JSON.stringify({ ...extra, type: `urn:corq:problem:${code}`, title: titles[status] ?? "Error", status, detail }),
    { status, headers: { ...headers, "content-type": "application/problem+json" } },
  );
}

/** Thrown by routes and middleware for a refusal that is not a CorqError; `headers` go on the response (Retry-After). */
export class ProblemError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    detail: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(detail);
  }
}

export function onError(thrown: unknown, c: Context): Response {
  if (thrown instanceof CorqError) {
    return problem(thrown.status, thrown.code, thrown.message, {
      ...thrown.extra,
      // `errors` is always the list of fields refused; other details (a conflict's stream and
      // versions) are members of their own
      ...(Array.isArray(thrown.details) ? { errors: thrown.details } : (thrown.details as object | undefined)),
    });
  }
  if (thrown instanceof ProblemError) return problem(thrown.status, thrown.code, thrown.message, {}, thrown.headers);
  // hono/csrf (the dashboard's forms) is what throws a 403: a form posted from another origin
  if (thrown instanceof HTTPException && thrown.status === 403) {
    const origin = c.req.header("origin");
    return problem(
      403,
      "forbidden_origin",
      `cross-site request refused: Origin ${origin === undefined ? "(none)" : JSON.stringify(origin)} is not ${requestOrigin(c)}`,
    );
  }
  if (thrown instanceof HTTPException)
    return problem(thrown.status, "http_error", thrown.message || titles[thrown.status] || "");
  const error = toError(thrown);
  if (isDatabaseUnavailable(error))
    return problem(503, "database_unavailable", "the database is unreachable; try again");
  console.error(`corq: ${c.req.method} ${c.req.path} failed:`, error);
  return problem(500, "internal", "internal error");
}
