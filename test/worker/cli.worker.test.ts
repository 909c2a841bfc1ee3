// The `corq` CLI (cli/run.ts, in-process) against the local stack: what people read, what
// scripts parse (--json) and the exit codes.
import { describe, expect, it } from "vitest";
import { run } from "../../cli/run.js";
import { freePort } from "../../cli/dev/embeddedPostgres.js";
import { eventually, useStack } from "../helpers/stack.js";

const { state } = useStack();

async function corq(args: string[], options: { env?: Record<string, string>; signal?: AbortSignal } = {}) {
  let out = "";
  let err = "";
  const code = await run(args, {
    env: { CORQ_URL: state.stack.url, CORQ_TOKEN: state.stack.adminToken, ...options.env },
    out: { write: (text: string) => (out += text) },
    err: { write: (text: string) => (err += text) },
    signal: options.signal,
  });
  return { code, out, err, json: () => JSON.parse(out) };
}

/** Keys of visitor-directory made dead, as a consumer's last failed attempt leaves them. */
async function deadKeys(streams: string[]) {
  await corq(["pause", "visitor-directory"]);
  for (const stream of streams) {
    expect((await corq(["append", stream, '{"name":"Registered","data":{"name":"x"}}'])).code).toBe(0);
  }
  await eventually(async () => {
    const { rows } = await state.db.query(
      `SELECT count(*)::int AS n FROM corq.keys k JOIN corq.subscriptions s ON s.id = k.subscription_id
       WHERE s.name = 'visitor-directory' AND k.key = ANY($1) AND k.pending > 0`,
      [streams],
    );
    expect(rows[0].n).toBe(streams.length);
  });
  await state.db.query(
    `UPDATE corq.keys k SET dead_at = now(), available_at = NULL, attempts = 5, last_error = 'Error: boom',
       failed_position = (SELECT max(position) FROM corq.events e WHERE e.stream = k.key)
     FROM corq.subscriptions s WHERE s.id = k.subscription_id AND s.name = 'visitor-directory' AND k.key = ANY($1)`,
    [streams],
  );
  await corq(["resume", "visitor-directory"]);
}

describe("corq CLI", () => {
  it("prints its usage, and refuses a wrong command line with exit 2", async () => {
    const help = await corq(["--help"]);
    expect(help).toMatchObject({ code: 0, err: "" });
    expect(help.out).toMatch(/usage: corq <command>/);
    expect(help.out).toMatch(/dead-letters/);
    expect(help.out).toMatch(/rewind <subscription> --to <p>/);
    expect(help.out).toMatch(/pause <subscription> \[--key k\]/);
    for (const args of [[], ["nope"], ["stats", "--colour"], ["keys"], ["keys", "greeter", "--status", "asleep"]]) {
      const refused = await corq(args);
      expect({ args, code: refused.code }).toEqual({ args, code: 2 });
      expect(refused.err).not.toBe("");
    }
  });

  it("refuses a URL without its scheme with exit 2 and says what it needs, from --url or CORQ_URL", async () => {
    const cases = [
      { given: { args: ["stats", "--url", "localhost:8787"] }, names: "--url", url: "localhost:8787" },
      { given: { args: ["stats"], env: { CORQ_URL: "127.0.0.1:8787" } }, names: "CORQ_URL", url: "127.0.0.1:8787" },
      {
        given: { args: ["stats"], env: { CORQ_URL: "ftp://127.0.0.1:8787" } },
        names: "CORQ_URL",
        url: "ftp://127.0.0.1:8787",
      },
    ];
    for (const { given, names, url } of cases) {
      const refused = await corq(given.args, { env: given.env });
      expect({ url, code: refused.code, out: refused.out }).toEqual({ url, code: 2, out: "" });
      expect(refused.err).toBe(
        `corq: ${names} must be an http:// or https:// URL, like http://127.0.0.1:8787 (got "${url}")\n`,
      );
    }
  });

  it("appends one event, an array or {events}; conflicts, bad JSON and invalid events have their exit codes", async () => {
    const one = await corq(["append", "visitor-cli-1", '{"name":"Registered","data":{"name":"Ann"}}', "--json"]);
    expect(one).toMatchObject({ code: 0, err: "" });
    expect(one.json()).toMatchObject({ stream: "visitor-cli-1", version: 0, positions: [expect.any(Number)] });
    const two = await corq([
      "append",
      "visitor-cli-1",
      '[{"name":"Arrived","data":{"roomId":"7"}},{"name":"Departed","data":{"roomId":"7"}}]',
      "--expected-version",
      "0",
    ]);
    expect(two.code).toBe(0);
    expect(two.out).toMatch(/^visitor-cli-1 at version 2, positions \d+, \d+\n$/);
    const wrapped = await corq(["append", "visitor-cli-2", '{"events":[{"name":"Registered","data":{}}]}', "--json"]);
    expect(wrapped.json().version).toBe(0);

    // a retry with its idempotency key: the first append's answer, nothing written again
    const keyed = ["append", "visitor-cli-3", '{"name":"Registered","data":{}}', "--idempotency-key", "cli-3"];
    const first = await corq([...keyed, "--json"]);
    expect(first.json().replayed).toBeUndefined();
    const retry = await corq(keyed);
    expect(retry.out).toBe(
      `visitor-cli-3 at version 0, positions ${first.json().positions[0]} (the first append with this key: nothing written)\n`,
    );
    expect((await corq([...keyed, "--json"])).json()).toEqual({ ...first.json(), replayed: true });

    const conflict = await corq(["append", "visitor-cli-1", '{"name":"X","data":1}', "--expected-version", "-1"]);
    expect(conflict.code).toBe(6);
    expect(conflict.err).toMatch(/409/);
    expect((await corq(["append", "visitor-cli-1", "{not json"])).code).toBe(2);
    const invalid = await corq(["append", "visitor-cli-1", '{"data":1}']);
    expect(invalid.code).toBe(1);
    expect(invalid.err).toMatch(/400 Bad Request: .*\n {2}\S*name/);
  });

  it("stats, keys, pause and resume: a table for people, JSON for scripts", async () => {
    const table = await corq(["stats"]);
    expect(table.code).toBe(0);
    const lines = table.out.split("\n");
    expect(lines[0]).toMatch(/^subscription\s+kind\s+paused\s+lag\s+pending\s+ready/);
    for (const name of ["greeter", "room-occupancy", "visitor-directory"]) {
      expect(lines.some((line) => line.startsWith(`${name} `))).toBe(true);
    }
    expect(table.out).toMatch(/log: \d+ events, head \d+/);
    const stats = (await corq(["stats", "--json"])).json();
    expect(stats.subscriptions.map((s: { name: string }) => s.name).sort()).toEqual([
      "greeter",
      "room-occupancy",
      "visitor-directory",
    ]);

    expect((await corq(["pause", "greeter"])).out).toBe("greeter paused\n");
    expect(
      (await corq(["stats", "--json"])).json().subscriptions.find((s: { name: string }) => s.name === "greeter"),
    ).toMatchObject({ paused: true });
    expect((await corq(["resume", "greeter"])).out).toBe("greeter running\n");

    await corq(["append", "visitor-cli-3", '{"name":"Registered","data":{"name":"Cat"}}']);
    await eventually(async () => {
      const keys = (await corq(["keys", "visitor-directory", "--json"])).json().keys;
      expect(keys.map((k: { key: string }) => k.key)).toEqual(
        expect.arrayContaining(["visitor-cli-1", "visitor-cli-3"]),
      );
    });
    const idle = await corq(["keys", "visitor-directory", "--status", "idle", "--limit", "1"]);
    expect(idle.out.split("\n")[0]).toMatch(/^key\s+status\s+pending\s+attempts/);
    expect(idle.out.split("\n")[1]).toMatch(/\sidle\s/);
    const unknown = await corq(["keys", "no-such-subscription"]);
    expect(unknown.code).toBe(5);
    expect(unknown.err).toMatch(/404/);
  });

  it("lists dead letters, retries one key and skips the rest", async () => {
    await deadKeys(["visitor-dead-1", "visitor-dead-2"]);
    const table = await corq(["dead-letters", "visitor-directory"]);
    expect(table.code).toBe(0);
    expect(table.out).toMatch(/^subscription\s+key\s+position\s+attempts\s+dead at\s+last error\n/);
    expect(table.out).toMatch(
      /visitor-directory\s+visitor-dead-1\s+\d+\s+5\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[+-]\d\d:\d\d\s+Error: boom/,
    );
    expect(
      (await corq(["dead-letters", "--json"]))
        .json()
        .deadLetters.map((d: { key: string }) => d.key)
        .sort(),
    ).toEqual(["visitor-dead-1", "visitor-dead-2"]);

    expect((await corq(["retry", "visitor-directory", "visitor-dead-1"])).out).toBe("retried: 1 dead key(s)\n");
    expect((await corq(["skip", "visitor-directory", "--json"])).json()).toEqual({ released: 1 });
    expect((await corq(["dead-letters"])).out).toBe("(none)\n");
  });

  it("rewind, and pause / resume of one key (--key): text, --json, exit codes", async () => {
    const keyRow = async () =>
      (
        await state.db.query(
          `SELECT k.pending, k.seq::int, k.paused_at IS NOT NULL AS paused FROM corq.keys k
           JOIN corq.subscriptions s ON s.id = k.subscription_id WHERE s.name = 'visitor-directory' AND k.key = 'visitor-rw'`,
        )
      ).rows[0];
    const appended = await corq([
      "append",
      "visitor-rw",
      '[{"name":"Registered","data":{"name":"Rae"}},{"name":"Arrived","data":{"roomId":"9"}}]',
      "--json",
    ]);
    const positions: number[] = appended.json().positions;
    await eventually(async () => expect(await keyRow()).toEqual({ pending: 0, seq: 2, paused: false }));

    const paused = await corq(["pause", "visitor-directory", "--key", "visitor-rw"]);
    expect(paused).toMatchObject({ code: 0, out: "visitor-directory key visitor-rw paused\n", err: "" });
    expect((await corq(["pause", "visitor-directory", "--key", "visitor-rw", "--json"])).json()).toMatchObject({
      key: "visitor-rw",
      status: "paused",
    });
    const rewound = await corq(["rewind", "visitor-directory", "--to", "beginning", "--key", "visitor-rw", "--json"]);
    expect(rewound).toMatchObject({ code: 0, err: "" });
    expect(rewound.json()).toEqual({ requeued: 2 });
    expect(await keyRow()).toEqual({ pending: 2, seq: 4, paused: true }); // queued again, new seqs, still paused

    const resumed = await corq(["resume", "visitor-directory", "--key", "visitor-rw"]);
    expect(resumed.code).toBe(0);
    expect(resumed.out).toMatch(/^visitor-directory key visitor-rw resumed \(.+\)\n$/);
    await eventually(async () => expect(await keyRow()).toEqual({ pending: 0, seq: 4, paused: false }));

    // from a position, inclusive: the key's second event only
    const fromSecond = await corq(["rewind", "visitor-directory", "--to", String(positions[1]), "--key", "visitor-rw"]);
    expect(fromSecond).toMatchObject({
      code: 0,
      out: `visitor-directory key visitor-rw: 1 event(s) queued again from position ${positions[1]}\n`,
    });
    await eventually(async () => expect(await keyRow()).toEqual({ pending: 0, seq: 5, paused: false }));
    // a whole subscription (greeter: from the last event on, whatever it takes of it)
    const whole = await corq(["rewind", "greeter", "--to", String(positions[1])]);
    expect(whole.code).toBe(0);
    expect(whole.out).toMatch(new RegExp(`^greeter: \\d+ event\\(s\\) queued again from position ${positions[1]}\n$`));

    // refused: the command line (2), the API (400: 1, 404: 5)
    for (const args of [
      ["rewind", "visitor-directory"],
      ["rewind", "visitor-directory", "--to", "soon"],
      ["rewind", "visitor-directory", "--to", "-1"],
      ["rewind", "visitor-directory", "--to", "beginning", "extra"],
      ["pause", "visitor-directory", "--key", ".."],
      ["pause", "visitor-directory", "--to", "3"],
      ["stats", "--key", "visitor-rw"],
      ["skip", "visitor-directory", "visitor-a", "--key", "visitor-b"],
    ]) {
      const refused = await corq(args);
      expect({ args, code: refused.code }).toEqual({ args, code: 2 });
      expect(refused.err).not.toBe("");
    }
    const noEvent = await corq(["rewind", "visitor-directory", "--to", "999999999"]);
    expect(noEvent.code).toBe(1);
    expect(noEvent.err).toMatch(/^corq: 400 /);
    expect((await corq(["rewind", "no-such-subscription", "--to", "beginning"])).code).toBe(5);
    expect((await corq(["pause", "no-such-subscription", "--key", "a"])).code).toBe(5);
    expect((await corq(["resume", "visitor-directory", "--key", "nobody-here"])).code).toBe(5);
  });

  it("tails the log: the last n events, then new ones with --follow", async () => {
    const last = await corq(["tail", "--limit", "2", "--json"]);
    expect(last.code).toBe(0);
    const events = last.out
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(events).toHaveLength(2);
    expect(events[1].position).toBeGreaterThan(events[0].position);

    const stop = new AbortController();
    let out = "";
    // from the last event seen above: the appends below come after it, whenever the follower starts
    const from = String(events[1].position);
    const following = run(["tail", "--follow", "--after", from, "--limit", "1", "--interval", "50"], {
      env: { CORQ_URL: state.stack.url, CORQ_TOKEN: state.stack.adminToken },
      out: { write: (text: string) => (out += text) },
      err: { write: () => undefined },
      signal: stop.signal,
    });
    await corq([
      "append",
      "visitor-tailed",
      '[{"name":"Registered","data":{"name":"Tia"}},{"name":"Arrived","data":{}}]',
    ]);
    await eventually(async () => {
      expect(out).toMatch(/\tvisitor-tailed@0\tRegistered\t\{"name":"Tia"\}\n/);
      expect(out).toMatch(/\tvisitor-tailed@1\tArrived\t\{\}\n/);
    });
    stop.abort();
    expect(await following).toBe(0);
  });

  it("exit 4 for a wrong token, 3 when nothing answers", async () => {
    const refused = await corq(["stats"], { env: { CORQ_TOKEN: "wrong" } });
    expect(refused.code).toBe(4);
    expect(refused.err).toMatch(/401/);
    const nobody = await corq(["stats", "--url", `http://127.0.0.1:${await freePort()}`]);
    expect(nobody.code).toBe(3);
    expect(nobody.err).toMatch(/no answer from http:\/\/127\.0\.0\.1:\d+: ECONNREFUSED/);
  });

  it("tokens: create one (its secret printed once), list them, revoke one; the token works until revoked", async () => {
    const created = await corq([
      "tokens",
      "create",
      "producer",
      "--scopes",
      "append",
      "--stream-prefix",
      "visitor-",
      "--json",
    ]);
    expect(created).toMatchObject({ code: 0, err: "" });
    const token = created.json();
    expect(token).toMatchObject({ name: "producer", scopes: ["append"], streamPrefix: "visitor-" });
    const human = await corq(["tokens", "create", "reader", "--scopes", "read"]);
    expect(human.out).toMatch(/^token [0-9a-f-]{36} \(read\): corq_\S+\nshown only now\n$/);

    const appended = await corq(["append", "visitor-tok", '{"name":"Registered","data":{}}'], {
      env: { CORQ_TOKEN: token.token },
    });
    expect(appended.code).toBe(0);
    const outside = await corq(["append", "other-tok", '{"name":"Registered","data":{}}'], {
      env: { CORQ_TOKEN: token.token },
    });
    expect(outside.code).toBe(4); // 403: outside its stream prefix
    expect(outside.err).toMatch(/403/);

    const list = await corq(["tokens", "list"]);
    expect(list.out.split("\n")[0]).toMatch(/^id\s+name\s+scopes\s+stream prefix\s+created\s+last used/);
    expect(list.out).toMatch(/producer\s+append\s+visitor-/);
    expect(list.out).not.toContain(token.token); // never the secret
    expect((await corq(["tokens", "revoke", token.id])).out).toBe(`revoked ${token.id}\n`);
    expect((await corq(["stats"], { env: { CORQ_TOKEN: token.token } })).code).toBe(4);
    expect((await corq(["tokens", "revoke", token.id])).code).toBe(5);
    expect((await corq(["tokens", "create", "x"])).code).toBe(2); // --scopes is required
    expect((await corq(["tokens", "rotate"])).code).toBe(2);
  });

  it("migrate applies corq's schema to DATABASE_URL (up to date here), and needs one", async () => {
    expect((await corq(["migrate"], { env: { DATABASE_URL: "" } })).code).toBe(2);
    const migrated = await corq(["migrate", "--json"], { env: { DATABASE_URL: state.stack.databaseUrl } });
    expect(migrated).toMatchObject({ code: 0, err: "" });
    expect(migrated.json()).toEqual({ applied: [] });
  });
});
