import { describe, expect, it } from "vitest";

describe("embedded Postgres module", () => {
  it("leaves no 'beforeExit' hook behind (one that exits 0 turned a failing test run green)", async () => {
    const before = process.listeners("beforeExit").length;
    await import("../infra/embeddedPostgres.js");
    expect(process.listeners("beforeExit")).toHaveLength(before);
  });
});
