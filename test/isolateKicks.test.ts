// Kicks coalesced within one isolate (functions/isolateKicks.ts): every kick's event names are
// advanced by a round that starts after the kick, and nothing waits behind more than one round.
import { describe, expect, it, vi } from "vitest";
import { coalesceKicks } from "../functions/isolateKicks.js";

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
      "db",
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
      coalesceKicks("db", ["B"], never, never),
      coalesceKicks("db", ["C", "B"], never, never),
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
      "db",
      ["A"],
      () => gate.promise.then(() => 0),
      async (names) => {
        again = names;
        return 0;
      },
    );
    await coalesceKicks(
      "db",
      ["B"],
      async () => 0,
      async () => 0,
    );
    await coalesceKicks(
      "db",
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
      "db",
      ["A"],
      () => gate.promise.then(() => "first"),
      async () => {
        seconds++;
        return "again";
      },
    );
    expect(
      await coalesceKicks(
        "other-db",
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
        "db",
        ["C"],
        async () => "later",
        async () => "again",
      ),
    ).toBe("later");
  });

  it("a first round that fails stops collecting: the next kick runs on its own", async () => {
    await expect(
      coalesceKicks(
        "db",
        ["A"],
        async () => {
          throw new Error("database gone");
        },
        async () => 0,
      ),
    ).rejects.toThrow("database gone");
    expect(
      await coalesceKicks(
        "db",
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
        "hung-db",
        ["A"],
        () => hung.promise.then(() => "first"),
        async () => "again",
      );
      // within 30 s a kick leaves its names with it
      expect(
        await coalesceKicks(
          "hung-db",
          ["B"],
          async () => "own",
          async () => "again",
        ),
      ).toBeUndefined();
      vi.setSystemTime(Date.now() + 31_000);
      const gate = deferred();
      const second = coalesceKicks(
        "hung-db",
        ["C"],
        () => gate.promise.then(() => "second"),
        async () => "second again",
      );
      hung.resolve();
      expect(await first).toBe("again"); // it still runs its round for B
      // the second is still the running one: a kick now leaves its names with it
      expect(
        await coalesceKicks(
          "hung-db",
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
