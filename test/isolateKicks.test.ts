// Kicks coalesced within one isolate (src/http/isolateKicks.ts): every kick's event names are
// advanced by a round that starts after the kick, and nothing waits behind more than one round.
import { describe, expect, it, vi } from "vitest";
import { coalesceKicks, type KickScope } from "../src/http/isolateKicks.js";

/** One app (its code subscriptions) on one database. */
const app = (databaseUrl: string, codeSubscriptions = ["orders", "emails"]): KickScope => ({
  databaseUrl,
  codeSubscriptions,
});

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe("coalesceKicks", () => {
  it("kicks that meet a running one leave their names with it; it runs once more for all of them", async () => {
    const gate = deferred();
    const rounds: (string[] | undefined)[] = [];
    const first = coalesceKicks(
      app("db"),
      ["A"],
      async () => {
        rounds.push(["A"]);
        await gate.promise;
        return 1;
      },
      async (names, firstResult) => {
        rounds.push(names);
        return firstResult + 1;
      },
    );
    const never = async () => {
      throw new Error("a coalesced kick must not run");
    };
    const left = await Promise.all([
      coalesceKicks(app("db"), ["B"], never, never),
      coalesceKicks(app("db"), ["C", "B"], never, never),
    ]);
    expect(left).toEqual([undefined, undefined]);
    gate.resolve();
    expect(await first).toBe(2);
    expect(rounds).toEqual([["A"], ["B", "C"]]);
  });

  it("a kick without names (all subscriptions) makes the next round cover all", async () => {
    const gate = deferred();
    let again: string[] | undefined | "not run" = "not run";
    const first = coalesceKicks(
      app("db"),
      ["A"],
      () => gate.promise.then(() => 0),
      async (names) => {
        again = names;
        return 0;
      },
    );
    await coalesceKicks(
      app("db"),
      ["B"],
      async () => 0,
      async () => 0,
    );
    await coalesceKicks(
      app("db"),
      undefined,
      async () => 0,
      async () => 0,
    );
    gate.resolve();
    await first;
    expect(again).toBeUndefined();
  });

  it("without company, no second round; other databases and later kicks run on their own", async () => {
    const gate = deferred();
    let seconds = 0;
    const first = coalesceKicks(
      app("db"),
      ["A"],
      () => gate.promise.then(() => "first"),
      async () => {
        seconds++;
        return "again";
      },
    );
    expect(
      await coalesceKicks(
        app("other-db"),
        ["B"],
        async () => "other",
        async () => "again",
      ),
    ).toBe("other");
    gate.resolve();
    expect(await first).toBe("first");
    expect(seconds).toBe(0);
    expect(
      await coalesceKicks(
        app("db"),
        ["C"],
        async () => "later",
        async () => "again",
      ),
    ).toBe("later");
  });

  it("meet only within one app: another set of code subscriptions on the same database runs on its own", async () => {
    const gate = deferred();
    const rounds: (string[] | undefined)[] = [];
    const first = coalesceKicks(
      app("db", ["orders", "emails"]),
      ["A"],
      () => gate.promise.then(() => "orders app"),
      async (names) => {
        rounds.push(names);
        return "orders app again";
      },
    );
    // another Worker app in this isolate, same database, other subscriptions: its own kick
    expect(
      await coalesceKicks(
        app("db", ["invoices"]),
        ["B"],
        async () => "invoices app",
        async () => "again",
      ),
    ).toBe("invoices app");
    expect(
      await coalesceKicks(
        app("db", ["orders"]),
        ["C"],
        async () => "a subset",
        async () => "again",
      ),
    ).toBe("a subset");
    // the same app (its subscriptions listed in another order, once twice): left with the running kick
    expect(
      await coalesceKicks(
        app("db", ["emails", "orders", "emails"]),
        ["D"],
        async () => "own",
        async () => "again",
      ),
    ).toBeUndefined();
    gate.resolve();
    expect(await first).toBe("orders app again");
    expect(rounds).toEqual([["D"]]);
  });

  it("a first round that fails stops collecting: the next kick runs on its own", async () => {
    await expect(
      coalesceKicks(
        app("db"),
        ["A"],
        async () => {
          throw new Error("database gone");
        },
        async () => 0,
      ),
    ).rejects.toThrow("database gone");
    expect(
      await coalesceKicks(
        app("db"),
        ["B"],
        async () => 7,
        async () => 0,
      ),
    ).toBe(7);
  });
});

describe("coalesceKicks, a kick that hangs", () => {
  it("is taken for hung after 30 s: a later kick runs on its own, and the hung one's end does not close the new one", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      const hung = deferred();
      const first = coalesceKicks(
        app("hung-db"),
        ["A"],
        () => hung.promise.then(() => "first"),
        async () => "again",
      );
      // within 30 s a kick leaves its names with it
      expect(
        await coalesceKicks(
          app("hung-db"),
          ["B"],
          async () => "own",
          async () => "again",
        ),
      ).toBeUndefined();
      vi.setSystemTime(Date.now() + 31_000);
      const gate = deferred();
      const second = coalesceKicks(
        app("hung-db"),
        ["C"],
        () => gate.promise.then(() => "second"),
        async () => "second again",
      );
      hung.resolve();
      expect(await first).toBe("again"); // it still runs its round for B
      // the second is still the running one: a kick now leaves its names with it
      expect(
        await coalesceKicks(
          app("hung-db"),
          ["D"],
          async () => "own",
          async () => "again",
        ),
      ).toBeUndefined();
      gate.resolve();
      expect(await second).toBe("second again");
    } finally {
      vi.useRealTimers();
    }
  });
});
