// A Worker whose Neon HTTP endpoint cannot be reached says which one in its 503, where that is
// safe to say: `corq dev`'s local endpoint gone, or plain `wrangler dev` on a local Postgres
// (Neon's own endpoint for 127.0.0.1 does not exist), with what to do about it. Never the
// DATABASE_URL's password, never the local endpoint's path token.
import { describe, expect, inject, it } from "vitest";
import { freePort } from "../../cli/dev/embeddedPostgres.js";
import { useStack } from "../helpers/stack.js";

const password = new URL(inject("postgresUrl")).password;
const port = await freePort(); // nobody listens there

describe("corq dev's HTTP endpoint not answering", () => {
  const token = "the-endpoints-path-token";
  const { api } = useStack({ vars: { CORQ_NEON_HTTP_ENDPOINT: `http://127.0.0.1:${port}/${token}/sql` } });

  it("GET /health and an API call answer 503 naming the endpoint (its origin only)", async () => {
    for (const response of [await api("GET", "/health", { token: null }), await api("GET", "/stats")]) {
      expect(response.status).toBe(503);
      expect(response.json).toMatchObject({
        type: "urn:corq:problem:database_unavailable",
        endpoint: `http://127.0.0.1:${port}`,
      });
      expect(response.json.detail).toMatch(
        new RegExp(
          `^the Neon HTTP endpoint http://127\\.0\\.0\\.1:${port} \\(CORQ_NEON_HTTP_ENDPOINT\\) could not be reached: .+; is corq dev still running\\?$`,
        ),
      );
      expect(JSON.stringify(response.json)).not.toContain(token);
      expect(JSON.stringify(response.json)).not.toContain(password);
    }
  });
});

describe("plain wrangler dev: a local Postgres, no CORQ_NEON_HTTP_ENDPOINT", () => {
  const { api } = useStack({ vars: { CORQ_NEON_HTTP_ENDPOINT: "" } });

  it("GET /health answers 503 saying Neon's endpoint for 127.0.0.1 could not be reached, and to run corq dev", async () => {
    const response = await api("GET", "/health", { token: null });
    expect(response.status).toBe(503);
    expect(response.json.detail).toMatch(
      /^the Neon HTTP endpoint https:\/\/\S+\/sql \(Neon's, for DATABASE_URL's host 127\.0\.0\.1\) could not be reached: .+\. A Postgres that is not Neon needs a local endpoint: run this Worker with `npx corq dev` \(or set CORQ_NEON_HTTP_ENDPOINT\)$/,
    );
    expect(JSON.stringify(response.json)).not.toContain(password);
  });
});
