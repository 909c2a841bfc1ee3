// The Worker's environment (src/http/env.ts): a malformed CORQ_WEBHOOK_SECRET is refused as
// the Worker's configuration is read — every request says so — instead of surfacing as a 500
// on the first signed webhook.
import { describe, expect, it } from "vitest";
import { createApi } from "../src/http/api.js";
import { settings } from "../src/http/env.js";
import { openCorq } from "../functions/database.js";

const whsec = (bytes: number) => `whsec_${Buffer.alloc(bytes, 7).toString("base64")}`;

describe("CORQ_WEBHOOK_SECRET", () => {
  it.each([
    ["not base64", "whsec_not*base64!"],
    ["base64 of too few bytes", whsec(8)],
    ["base64 of too many bytes", whsec(65)],
    ["nothing after the prefix", "whsec_"],
    ["padding in the middle", `${whsec(24).slice(0, 10)}=${whsec(24).slice(11)}`],
    ["a bad one among rotated secrets", `dev-webhook-secret ${whsec(24).slice(0, -1)}`],
  ])("refuses %s", async (_, secret) => {
    expect(() => settings({ CORQ_WEBHOOK_SECRET: secret })).toThrow(
      /^CORQ_WEBHOOK_SECRET \(secret \d of \d\): a whsec_ secret must/,
    );
    // every request answers 500 with the reason (not the secret), /health included
    const response = await createApi({ subscriptions: [], open: openCorq }).request(
      "/health",
      {},
      { CORQ_WEBHOOK_SECRET: secret },
    );
    expect(response.status).toBe(500);
    const body = await response.json();
    expect(body).toMatchObject({
      status: 500,
      type: "urn:corq:problem:misconfigured",
      detail: expect.stringContaining("CORQ_WEBHOOK_SECRET"),
    });
    for (const part of secret.split(" ").filter((p) => p.length > 6))
      expect(JSON.stringify(body)).not.toContain(part.slice(6));
  });

  it.each([
    ["a whsec_ secret of 24 bytes", whsec(24)],
    ["a whsec_ secret of 64 bytes", whsec(64)],
    ["unpadded base64", whsec(32).replace(/=+$/, "")],
    ["a plain secret", "dev-webhook-secret"],
    ["two while rotating", `${whsec(32)} dev-webhook-secret`],
    ["none (the webhook is disabled)", ""],
  ])("accepts %s", (_, secret) => {
    expect(() => settings({ CORQ_WEBHOOK_SECRET: secret })).not.toThrow();
  });
});

describe("CORQ_KEYS_PER_CLAIM", () => {
  it.each([
    [undefined, 4],
    ["1", 1],
    ["16", 16],
    ["256", 256],
    ["257", 4],
    ["0", 4],
    ["many", 4],
  ])("%s → %i keys per claim (malformed or out of range: the default)", (value, expected) => {
    expect(settings({ CORQ_KEYS_PER_CLAIM: value }).keysPerClaim).toBe(expected);
  });
});

describe("CORQ_REPLAY_KEYS", () => {
  it.each([
    [undefined, undefined, 1], // a quarter of the default 4, at least 1
    [undefined, "16", 4],
    [undefined, "2", 1],
    ["2", undefined, 2],
    ["4", undefined, 4],
    ["12", "16", 12],
    ["5", undefined, 4], // more than the keys per claim: all of them
    ["256", "256", 256],
    ["257", "16", 4],
    ["0", "16", 4],
    ["-1", undefined, 1],
    ["2.5", undefined, 1],
    ["", "16", 4],
    ["some", "16", 4],
  ])(
    "%s with CORQ_KEYS_PER_CLAIM %s → %i replaying keys at once (malformed or out of range: the default)",
    (value, keys, expected) => {
      expect(settings({ CORQ_REPLAY_KEYS: value, CORQ_KEYS_PER_CLAIM: keys }).replayKeys).toBe(expected);
    },
  );
});
