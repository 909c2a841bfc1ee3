// Where corq's HTTP app lives on its host: "" (the root) or a prefix such as "/corq", when a
// user's own Worker (or server) has routes of its own and hands corq the requests under it.
// corq receives those requests with their full path (the prefix kept, not stripped): it
// matches its routes on the rest, and puts the prefix back on everything it sends out — the
// dashboard's links, forms, redirects and cookie Path, and the fan-out's invocations of itself.
import { getPath } from "hono/utils/url";
import { CorqError } from "../errors.js";

// unreserved URL characters only: a prefix that needs no encoding reads the same in a
// Location header, a cookie's Path and an HTML attribute
const SEGMENT = /^[A-Za-z0-9._~-]+$/;
const MAX_LENGTH = 200;

/**
 * `basePath` as given to createWorker or startServe: "" or "/" (or undefined) is the root;
 * otherwise "/" and segments of unreserved characters ("/corq", "/ops/queues"), no trailing
 * "/", no "." or "..", no query or fragment. Anything else is an invalid_config error, thrown
 * where the app is made (a Worker's module evaluation), not at its first request.
 */
export function parseBasePath(value: unknown): string {
  if (value === undefined || value === "" || value === "/") return "";
  const refuse = (why: string): never => {
    throw new CorqError("invalid_config", `basePath: ${why} (got ${JSON.stringify(value)}; e.g. "/corq")`);
  };
  if (typeof value !== "string") return refuse("must be a string");
  if (value.length > MAX_LENGTH) return refuse(`must be at most ${MAX_LENGTH} characters`);
  if (!value.startsWith("/")) return refuse('must start with "/"');
  if (value.endsWith("/")) return refuse('must not end with "/"');
  for (const segment of value.slice(1).split("/")) {
    if (segment === "") return refuse('must not contain "//"');
    if (segment === "." || segment === "..") return refuse('must not contain "." or ".." segments');
    if (!SEGMENT.test(segment))
      return refuse("segments may hold only letters, digits and - . _ ~ (no query, fragment, space or %)");
  }
  return value;
}

/** The path under `basePath` of a request path ("/corq/health" → "/health", "/corq" → "/"), or null outside it. */
export function pathWithin(basePath: string, path: string): string | null {
  if (basePath === "") return path;
  if (path === basePath) return "/";
  return path.startsWith(`${basePath}/`) ? path.slice(basePath.length) : null;
}

/**
 * Hono's path of a request with `basePath` taken off, for `new Hono({ getPath })`: the app's
 * routes are written from "/" whatever the prefix. A path outside the prefix is left whole
 * (outsideBase refuses it before any route sees it).
 */
export function getPathWithin(basePath: string): ((request: Request) => string) | undefined {
  if (basePath === "") return undefined;
  return (request) => {
    const path = getPath(request);
    return pathWithin(basePath, path) ?? path;
  };
}

/** Whether a request's path is outside `basePath` (never at the root). */
export const outsideBase = (basePath: string, request: Request): boolean =>
  basePath !== "" && pathWithin(basePath, getPath(request)) === null;

/** A path of the app ("/ui/streams", "/") as a client must request it: under `basePath` ("/" is the prefix itself). */
export const underBase = (basePath: string, path: string): string =>
  path === "/" ? basePath || "/" : `${basePath}${path}`;
