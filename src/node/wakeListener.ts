// One dedicated connection that LISTENs on the wake channel (src/sql/log/notify.ts) for the whole
// process. A notification is only a hint (DESIGN.md): Postgres drops it for a listener that is
// not connected, so every (re)connect is followed by a full re-check (`onConnected`), and a
// connection that died quietly (a network partition sends no FIN) is found by `check()`,
// which the safety-net timer calls. Poolers in transaction mode (PgBouncer, Neon's pooled
// host) silently drop LISTEN: point DATABASE_URL at a direct connection.
import pg from "pg";
import { WAKE_CHANNEL, type WakePayload } from "../sql/log/notify.js";

export interface WakeListener {
  /** Whether LISTEN is in place right now. */
  connected(): boolean;
  /** Pings the connection (SELECT 1); a dead one is replaced (and a re-check follows). */
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
  };

  void connect();

  return {
    connected: () => listening,
    async check() {
      if (!listening || !client) return;
      const current = client;
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
      if (retryTimer) clearTimeout(retryTimer);
      await client?.end().catch(() => undefined);
    },
  };
}
