// Over https the dashboard also asks for HSTS (the Worker tests run on plain http).
import { describe, expect, it } from "vitest";
import { createApi } from "../src/http/api.js";
import { openCorq } from "../functions/database.js";

describe("dashboard over https", () => {
  it("sends Strict-Transport-Security with the other security headers", async () => {
    const response = await createApi({ subscriptions: [], open: openCorq }).request(
      "https://corq.example/login",
      {},
      { CORQ_ADMIN_TOKEN: "x".repeat(32) },
    );
    expect(response.status).toBe(200);
    expect(response.headers.get("strict-transport-security")).toBe("max-age=31536000; includeSubDomains");
    expect(response.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
  });
});
