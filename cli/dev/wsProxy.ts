// A WebSocket→TCP proxy so the Neon serverless driver (WebSockets only) reaches a plain
// local Postgres: what Neon's own proxy does in production. The driver asks for
// ws://127.0.0.1:<port>/<token>/v1?address=<host>:<port>.
//
// Anything on this machine can reach a port on 127.0.0.1, a web page in a browser included,
// and behind this proxy is a database session. So it listens on 127.0.0.1 only, connects only
// to the one configured Postgres address, wants a random path token made at each start (the
// Worker gets it in CORQ_NEON_WS_PROXY; a page that finds the port cannot guess it), and
// refuses any upgrade that carries an `Origin` header: browsers always send one, the Workers
// runtime's WebSocket client does not.
import { WebSocketServer, type WebSocket } from "ws";
import { connect } from "node:net";
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";

export interface WsProxy {
  /** `127.0.0.1:<port>/<token>`: what to put in CORQ_NEON_WS_PROXY (the driver appends `/v1?address=…`). */
  address: string;
  close(): Promise<void>;
  /** WebSocket sessions opened since the start (each one a Postgres connection). */
  sessions(): number;
}

export interface WsProxyOptions {
  /**
   * Simulated network distance to the database (ms): every message waits half of it on its
   * way in each direction (as the HTTP SQL endpoint delays its answers), and the upgrade one
   * full round trip. Order is kept: data and the close behind it wait alike. Default 0.
   */
  latencyMs?: number;
}

export async function startWsProxy(
  target: { host: string; port: number },
  options: WsProxyOptions = {},
): Promise<WsProxy> {
  const latencyMs = options.latencyMs ?? 0;
  // no timer at all without latency (setTimeout(0) still waits a tick)
  const later = (fn: () => void) => (latencyMs > 0 ? void setTimeout(fn, latencyMs / 2) : fn());
  const token = randomBytes(24).toString("base64url");
  const allowed = `${target.host}:${target.port}`;
  const server = new WebSocketServer({
    host: "127.0.0.1",
    port: 0,
    verifyClient: ({ req }, done) => {
      const refusal = refuse(req, token, allowed);
      if (refusal) done(false, refusal.status, refusal.reason);
      else if (latencyMs > 0)
        setTimeout(() => done(true), latencyMs); // the upgrade's round trip
      else done(true);
    },
  });
  const sockets = new Set<WebSocket>();
  let opened = 0;
  server.on("connection", (ws) => {
    sockets.add(ws);
    opened++;
    const tcp = connect(target.port, target.host);
    tcp.setNoDelay(true);
    tcp.on("data", (chunk) => later(() => ws.readyState === ws.OPEN && ws.send(chunk)));
    tcp.on("close", () => later(() => ws.close()));
    tcp.on("error", () => later(() => ws.close()));
    ws.on("message", (data) => later(() => tcp.write(data as Buffer)));
    ws.on("close", () => {
      sockets.delete(ws);
      later(() => tcp.destroy());
    });
    ws.on("error", () => later(() => tcp.destroy()));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("listening", resolve);
    server.once("error", reject);
  });
  const { port } = server.address() as { port: number };
  return {
    sessions: () => opened,
    address: `127.0.0.1:${port}/${token}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const ws of sockets) ws.terminate();
        server.close(() => resolve());
      }),
  };
}

/** Why an upgrade request is refused (403), or undefined when it may pass. */
function refuse(req: IncomingMessage, token: string, allowed: string): { status: number; reason: string } | undefined {
  if (req.headers.origin !== undefined || req.headers["sec-websocket-origin"] !== undefined) {
    return { status: 403, reason: "browser origins are refused" };
  }
  const url = new URL(req.url ?? "/", "http://proxy");
  const [, first = ""] = url.pathname.split("/");
  if (!sameSecret(first, token)) return { status: 403, reason: "wrong path token" };
  if (url.searchParams.get("address") !== allowed) return { status: 403, reason: "address not allowed" };
  return undefined;
}

/** Constant-time comparison (of digests, so the lengths need not match). */
function sameSecret(given: string, expected: string): boolean {
  const digest = (text: string) => createHash("sha256").update(text).digest();
  return timingSafeEqual(digest(given), digest(expected));
}
