// The Worker as deployed (no CORQ_LOCAL): what it tells the public when something is wrong.
import { describe, expect, inject, it } from "vitest";
import { useStack } from "../helpers/stack.js";

/** The test server's URL with a wrong password: Postgres answers "password authentication failed for user …". */
const wrongPassword = () => {
  const url = new URL(inject("postgresUrl"));
  url.password = "not-the-password";
  return url.toString();
};

describe("database unreachable", () => {
  const { api } = useStack({ vars: { DATABASE_URL: wrongPassword() } });

  it("GET /health answers a generic 503 problem: no database error text", async () => {
    const response = await api("GET", "/health", { token: null });
    expect(response.status).toBe(503);
    expect(response.type).toContain("application/problem+json");
    expect(response.json).toEqual({
      type: "urn:corq:problem:database_unavailable",
      title: "Service Unavailable",
      status: 503,
      detail: "the database is unavailable",
      ok: false,
      db: "unavailable",
    });
  });
});
