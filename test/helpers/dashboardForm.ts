// The dashboard's forms as a browser sends them, for the Worker tests: a POST from the
// dashboard's own origin (its CSRF check wants that Origin), redirects not followed.
import { expect } from "vitest";
import { present } from "./present.js";

/** POSTs a dashboard form to `baseUrl` + `path` from `baseUrl`'s origin; redirects are not followed. */
export function postForm(
  baseUrl: string,
  path: string,
  fields: Record<string, string>,
  options: { cookie?: string; headers?: Record<string, string> } = {},
): Promise<Response> {
  return fetch(`${baseUrl}${path}`, {
    method: "POST",
    redirect: "manual",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      origin: baseUrl,
      ...(options.cookie ? { cookie: options.cookie } : {}),
      ...options.headers,
    },
    body: new URLSearchParams(fields).toString(),
  });
}

/** The session cookie a login answer sets, as a `cookie` header value. */
export function sessionCookie(response: Response): string {
  const [cookie = ""] = present(response.headers.get("set-cookie"), "a Set-Cookie header on the login").split(";");
  return cookie;
}

/** Logs in with `token` (expects the 303 of a good login); the session cookie as a `cookie` header value. */
export async function logIn(baseUrl: string, token: string): Promise<string> {
  const response = await postForm(baseUrl, "/login", { token });
  expect(response.status).toBe(303);
  return sessionCookie(response);
}
