// How a serve process hears of work: a LISTEN (wakeListener.ts) on CORQ_LISTEN_DATABASE_URL,
// else on DATABASE_URL, checked after every (re)connect by a probe sent on the process's own
// pool; and, while no probe has arrived — a transaction-mode pooler, a LISTEN URL that does not
// reach the database the NOTIFYs go to, a LISTEN connection that is down — a look at everything
// every `pollMs` instead (CORQ_POLL_MS, 1 s by default; never longer than the safety net). Never
// silently slow: the first failed probe is a warning that says why and what to set, and a
// change either way is logged.
import type pg from "pg";
import type { Executor } from "../db/executor.js";
import { notifyProbe, type WakePayload } from "../sql/log/notify.js";
import { listenForWakes, type WakeListener } from "./wakeListener.js";

export interface WakeUpsOptions {
  /** The process's own pool: every NOTIFY it sends goes through it (its echoes are ignored), and the probe. */
  pool: pg.Pool;
  db: Executor;
  /** Where the LISTEN goes: CORQ_LISTEN_DATABASE_URL or DATABASE_URL. */
  listenUrl: string;
  /** Whether `listenUrl` is CORQ_LISTEN_DATABASE_URL (the advice in the warning differs). */
  separateListenUrl: boolean;
  /** A notification another process sent. */
  onWake(payload: WakePayload): void;
  /** A look at everything: after every (re)connect, and every `pollMs` while notifications do not arrive. */
  recheck(): void;
  /** The listener is pinged (and a failing probe sent again) this often. */
  safetyNetMs: number;
  pollMs: number;
  /** How long a probe may take to arrive (default 2 s). */
  probeTimeoutMs?: number;
  log(line: string): void;
}

export interface WakeUps {
  listener: WakeListener;
  /** Resolves at the first probe's verdict (or once `boundMs` passed without one: the warning says so). */
  checked(boundMs: number): Promise<void>;
  close(): Promise<void>;
}

export function hearWakeUps(options: WakeUpsOptions): WakeUps {
  const { pool, log } = options;
  const pollMs = Math.min(options.pollMs, options.safetyNetMs);
  const probeTimeoutMs = options.probeTimeoutMs ?? 2000;
  // Every NOTIFY this process sends goes through its own pool, and it has woken itself already:
  // its own notifications, which Postgres delivers to its LISTEN too, are ignored, known by their
  // sender's backend pid. Without it every append over HTTP ran the advancer twice at low rates
  // (once woken, once more by its own echo). Through a pooler the pid a client knows is the
  // pooler's, not the server session's: the echoes are not recognized there and cost an advance
  // that finds nothing (what a probe sends is ignored either way).
  const ownBackends = new Set<number>();
  const backendOf = (client: unknown) => (client as { processID?: number | null }).processID;
  pool.on("connect", (client) => {
    const pid = backendOf(client);
    if (pid) ownBackends.add(pid);
  });
  pool.on("remove", (client) => {
    const pid = backendOf(client);
    if (pid) ownBackends.delete(pid);
  });

  const where = options.separateListenUrl ? "CORQ_LISTEN_DATABASE_URL" : "DATABASE_URL";
  const polled = `wake-ups are polled every ${pollMs} ms instead (CORQ_POLL_MS): new work waits up to that long`;
  let delivering: boolean | undefined; // undefined: no verdict yet
  let unanswered = false; // the start went on without a verdict (and said so)
  let firstVerdict: () => void = () => undefined;
  const verdict = new Promise<void>((resolve) => (firstVerdict = resolve));
  const onProbed = ({ delivering: now, sendError }: { delivering: boolean; sendError?: unknown }) => {
    firstVerdict();
    if (now === delivering) return;
    const before = delivering;
    delivering = now;
    if (now) {
      if (before === false || unanswered)
        log(
          `LISTEN on ${where} receives notifications${before === false ? " again" : ""}: wake-ups are immediate, polling stopped`,
        );
      return;
    }
    if (sendError !== undefined) {
      log(`warning: could not check the LISTEN on ${where} (sending a probe failed: ${String(sendError)}); ${polled}`);
      return;
    }
    const advice = options.separateListenUrl
      ? "CORQ_LISTEN_DATABASE_URL must be a direct connection (not a pooler) to the same database as DATABASE_URL"
      : "it is most likely a transaction-mode pooler (PgBouncer, RDS Proxy, Neon's -pooler host), which cannot hold a " +
        "LISTEN. Set CORQ_LISTEN_DATABASE_URL to a direct connection to the same database (on Neon: the connection " +
        "string without -pooler) for immediate wake-ups";
    log(
      `warning: LISTEN on ${where} does not receive notifications (a probe sent on DATABASE_URL did not arrive ` +
        `within ${probeTimeoutMs} ms): ${advice}. Meanwhile ${polled}.`,
    );
  };

  const listener = listenForWakes({
    connectionString: options.listenUrl,
    onWake: (payload, sender) => {
      if (!ownBackends.has(sender)) options.onWake(payload);
    },
    onConnected: options.recheck,
    probe: { send: (token) => options.db.run(notifyProbe(token)), timeoutMs: probeTimeoutMs },
    onProbed,
    log,
  });
  // the listener is pinged by the safety net: a connection that died quietly is replaced, a
  // LISTEN whose probe did not arrive is probed again
  const ping = setInterval(() => void listener.check(), options.safetyNetMs);
  ping.unref();
  // polling while no probe has arrived (a LISTEN that is down, too: its reconnect re-checks anyway)
  const poll = setInterval(() => {
    if (!listener.delivering()) options.recheck();
  }, pollMs);
  poll.unref();

  return {
    listener,
    async checked(boundMs) {
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), boundMs)));
      const answered = await Promise.race([verdict.then(() => true), bound]);
      clearTimeout(timer);
      if (answered) return;
      unanswered = true;
      log(`warning: no LISTEN on ${where} within ${boundMs} ms (it goes on trying); meanwhile ${polled}`);
    },
    async close() {
      clearInterval(ping);
      clearInterval(poll);
      await listener.close();
    },
  };
}
