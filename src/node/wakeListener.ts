// One dedicated connection that LISTENs on the wake channel (src/sql/log/notify.ts) for the whole
// process. A notification is only a hint (DESIGN.md): Postgres drops it for a listener that is
// not connected, so every (re)connect is followed by a full re-check (`onConnected`), and a
// connection that died quietly (a network partition sends no FIN) is found by `check()`,
// which the safety-net timer calls.
// A LISTEN that Postgres accepted may still never deliver: a transaction-mode pooler (PgBouncer,
// Neon's pooled `-pooler` host) runs it on a server session it then lends to other clients, and
// nothing sent on other connections comes back. So after every (re)connect the listener checks:
// a probe NOTIFY sent by `probe.send` on the process's own pool (another connection: the LISTEN's
// own NOTIFY could run on the session that holds the LISTEN and come back through a pooler too)
// must arrive within `probe.timeoutMs`. `delivering()` says whether it did; until one does,
// `check()` probes again (src/node/wakeUps.ts polls meanwhile).
import pg from "pg";
import { randomUUID } from "node:crypto";
import { PROBE_PREFIX, WAKE_CHANNEL, type WakePayload } from "../sql/log/notify.js";

export interface WakeListener {
  /** Whether LISTEN is in place right now. */
  connected(): boolean;
  /** Whether a probe sent on another connection reached this LISTEN since it was (re)connected. */
  delivering(): boolean;
  /**
   * Pings the connection (SELECT 1); a dead one is replaced (and a re-check follows). A LISTEN
   * whose last probe did not arrive is probed again.
   */
  check(): Promise<void>;
  close(): Promise<void>;
}

export interface WakeListenerOptions {
  connectionString: string;
  /** `sender`: the backend process id of the session that sent it (a process's own connections are known to it). */
  onWake(payload: WakePayload, sender: number): void;
  /** After every successful LISTEN (the first one too): notifications may have been missed. */
  onConnected(): void;
  log(line: string): void;
  /** The self-check after each LISTEN: `send(token)` NOTIFYs a probe on another connection (notifyProbe). */
  probe?: {
    send(token: string): Promise<unknown>;
    /** How long a probe may take to arrive (default 2 s). */
    timeoutMs?: number;
  };
  /** After each probe: whether it arrived (if it could not be sent: the error). */
  onProbed?(verdict: { delivering: boolean; sendError?: unknown }): void;
  /** Reconnect delays: doubling from this (default 100 ms) … */
  retryMinMs?: number;
  /** … up to this (default 5 s). */
  retryMaxMs?: number;
}

export function listenForWakes(options: WakeListenerOptions): WakeListener {
  const retryMinMs = options.retryMinMs ?? 100;
  const retryMaxMs = options.retryMaxMs ?? 5000;
  let client: pg.Client | undefined;
  let listening = false;
  let closed = false;
  let retryMs = retryMinMs;
  let retryTimer: NodeJS.Timeout | undefined;
  let down = false; // logged once per outage, not once per attempt
  let delivering = false;
  let probing: Promise<void> | undefined;
  // the payload of the probe in flight, and what hears it
  let awaited: { payload: string; arrived(): void } | undefined;

  // One probe at a time, of the connection LISTENing now (a reconnect meanwhile makes its verdict moot).
  const probe = (connection: pg.Client) => {
    const { send } = options.probe ?? {};
    if (!send || probing) return probing;
    const run = async () => {
      const token = randomUUID();
      const payload = PROBE_PREFIX + token;
      let timer: NodeJS.Timeout | undefined;
      const arrived = new Promise<boolean>((resolve) => {
        awaited = { payload, arrived: () => resolve(true) };
        timer = setTimeout(() => resolve(false), options.probe?.timeoutMs ?? 2000);
      });
      let sendError: unknown;
      const sent = send(token).then(
        () => true,
        (error: unknown) => {
          sendError = error ?? new Error("sending the probe failed");
          return false;
        },
      );
      const heard = (await sent) && (await arrived);
      clearTimeout(timer);
      awaited = undefined;
      if (connection !== client || !listening || closed) return;
      delivering = heard;
      options.onProbed?.(sendError === undefined ? { delivering: heard } : { delivering: false, sendError });
    };
    probing = run().finally(() => {
      probing = undefined;
      // reconnected while it ran: the connection LISTENing now is probed
      if (connection !== client && client && listening && !closed) void probe(client);
    });
    return probing;
  };

  const connect = async () => {
    retryTimer = undefined;
    if (closed) return;
    const next = new pg.Client({ connectionString: options.connectionString, keepAlive: true });
    client = next;
    let failed = false;
    const lost = (error?: unknown) => {
      if (failed) return;
      failed = true;
      listening = false;
      delivering = false;
      next.end().catch(() => undefined);
      if (closed) return;
      if (!down) options.log(`LISTEN connection lost${error ? ` (${String(error)})` : ""}; reconnecting`);
      down = true;
      retryTimer = setTimeout(connect, retryMs);
      retryMs = Math.min(retryMaxMs, retryMs * 2);
    };
    next.on("error", lost);
    next.on("end", () => lost());
    next.on("notification", (message) => {
      if (message.channel !== WAKE_CHANNEL) return;
      const payload = message.payload;
      if (awaited && payload === awaited.payload) return awaited.arrived();
      if (payload === "append" || payload === "ready" || payload === "tokens" || payload === "alerts")
        options.onWake(payload, message.processId);
    });
    try {
      await next.connect();
      await next.query(`LISTEN ${WAKE_CHANNEL}`);
    } catch (error) {
      lost(error);
      return;
    }
    if (failed || closed) return;
    listening = true;
    retryMs = retryMinMs;
    if (down) options.log("LISTEN connection back");
    down = false;
    options.onConnected();
    void probe(next);
  };

  void connect();

  return {
    connected: () => listening,
    delivering: () => listening && delivering,
    async check() {
      if (!listening || !client) return;
      const current = client;
      if (!delivering) await probe(current);
      // a partitioned connection answers nothing, ever: a ping without an answer is a failure
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error("no answer to a ping within 5 s")), 5000);
      });
      try {
        await Promise.race([current.query("SELECT 1"), timeout]);
      } catch (error) {
        if (current === client) current.emit("error", error);
      } finally {
        clearTimeout(timer);
      }
    },
    async close() {
      closed = true;
      listening = false;
      delivering = false;
      if (retryTimer) clearTimeout(retryTimer);
      await client?.end().catch(() => undefined);
    },
  };
}
