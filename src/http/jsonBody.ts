// A request's JSON body, validated: a wrong content type or malformed JSON is a 4xx, never a 500.
import type { Context } from "hono";
import type { z } from "zod";
import { parseOrThrow } from "../config.js";
import { CorqError } from "../errors.js";
import { MAX_BODY_NESTING, nestsDeeperThan } from "./jsonNesting.js";
import { ProblemError } from "./problem.js";

export async function jsonBody<T extends z.ZodType>(c: Context, schema: T): Promise<z.output<T>> {
  const type = c.req.header("content-type") ?? "";
  if (!/^application\/([\w.+-]+\+)?json\b/i.test(type)) {
    throw new ProblemError(415, "unsupported_media_type", "send the body as application/json");
  }
  const text = await c.req.text();
  if (nestsDeeperThan(text, MAX_BODY_NESTING)) {
    throw new CorqError("invalid_input", `the body nests deeper than ${MAX_BODY_NESTING} levels`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new CorqError("invalid_input", "the body is not valid JSON");
  }
  return parseOrThrow(schema, parsed, "invalid_input", "body");
}
