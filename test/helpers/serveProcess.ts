// `npm run serve` as a child process, as a user starts it: the real entry (infra/serve.ts, or
// another entry with other subscriptions), its own environment, its `corq ready` line.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, expect, inject } from "vitest";
import { createTestDatabase } from "./database.js";
import { present } from "./present.js";

const root = fileURLToPath(new URL("../..", import.meta.url));

export interface ServeProcess {
  url: string;
  child: ChildProcess;
  /** Everything it printed so far (stdout and stderr). */
  output(): string;
  /** Sends `signal` and resolves with the exit code (null: killed by a signal). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  exited: Promise<number | null>;
}

/**
 * Starts `node --import tsx <entry>` (default infra/serve.ts, what `npm run serve` runs) with
 * `env` on top of this process's environment (DATABASE_URL from `databaseUrl`, PORT=0), and
 * resolves once it printed `corq ready <url>`.
 */
export async function startServeProcess(options: {
  databaseUrl: string;
  env?: Record<string, string>;
  entry?: string;
  timeoutMs?: number;
}): Promise<ServeProcess> {
  const entry = options.entry ?? "infra/serve.ts";
  const child = spawn(process.execPath, ["--import", "tsx", entry], {
    cwd: root,
    env: { ...process.env, PORT: "0", ...options.env, DATABASE_URL: options.databaseUrl },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  // 'close', not 'exit': by then everything it printed has been read from its pipes
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`serve did not start within ${options.timeoutMs ?? 60_000} ms:\n${output}`)),
      options.timeoutMs ?? 60_000,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      // a worker (CORQ_ROLE=worker) serves no HTTP: its url is ""
      const ready = /corq ready (http:\/\/\S+|\(worker: no HTTP\))/.exec(output);
      if (ready) {
        clearTimeout(timer);
        const address = present(ready[1], "the ready line's address");
        resolve(address.startsWith("http") ? address : "");
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited (${code}) before it was ready:\n${output}`));
    });
  });
  return {
    url,
    child,
    output: () => output,
    exited,
    async stop(signal = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/**
 * For a test file: a fresh database, ONE serve process of test/serve/recordingServe.ts with `env`
 * on it, and a small pool on the database (`raw`); filled in before the file's tests (register
 * it before the file's own beforeAll, which can then use it), and after them the process is
 * stopped — it must exit 0 — and the database dropped.
 */
export function useRecordingServe(env: Record<string, string>) {
  const state = {} as { url: string; serve: ServeProcess; raw: pg.Pool; drop: () => Promise<void> };
  beforeAll(async () => {
    const database = await createTestDatabase(inject("postgresUrl"));
    state.url = database.url;
    state.drop = database.drop;
    state.raw = new pg.Pool({ connectionString: database.url, max: 2 });
    state.serve = await startServeProcess({ databaseUrl: database.url, entry: "test/serve/recordingServe.ts", env });
  }, 60_000);
  afterAll(async () => {
    expect(await state.serve?.stop()).toBe(0);
    await state.raw?.end();
    await state.drop?.();
  });
  return state;
}
