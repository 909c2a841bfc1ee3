import { describe, expect, it } from "vitest";

describe("embedded Postgres module", () => {
  it("leaves no 'beforeExit' or 'exit' hook behind (one that exits 0 turned a failing test run green)", async () => {
    const before = [process.listeners("beforeExit").length, process.listeners("exit").length];
    await import("../cli/dev/embeddedPostgres.js");
    expect([process.listeners("beforeExit").length, process.listeners("exit").length]).toEqual(before);
  });
});
