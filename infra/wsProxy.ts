// A WebSocket→TCP proxy so the Neon serverless driver (WebSockets only) reaches a plain
// local Postgres: what Neon's own proxy does in production. The driver asks for
// ws://<proxy>/v1?address=<host>:<port>; only the one configured Postgres address is allowed.
import { WebSocketServer, type WebSocket } from "ws";
import { connect } from "node:net";

export interface WsProxy {
  /** host:port to put in CORQ_NEON_WS_PROXY. */
  address: string;
  close(): Promise<void>;
}

export async function startWsProxy(target: { host: string; port: number }): Promise<WsProxy> {
  const allowed = `${target.host}:${target.port}`;
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  const sockets = new Set<WebSocket>();
  server.on("connection", (ws, request) => {
    const address = new URL(request.url ?? "/", "http://proxy").searchParams.get("address");
    if (address !== allowed) return ws.close(1008, "address not allowed");
    sockets.add(ws);
    const tcp = connect(target.port, target.host);
    tcp.setNoDelay(true);
    tcp.on("data", (chunk) => ws.readyState === ws.OPEN && ws.send(chunk));
    tcp.on("close", () => ws.close());
    tcp.on("error", () => ws.close());
    ws.on("message", (data) => tcp.write(data as Buffer));
    ws.on("close", () => {
      sockets.delete(ws);
      tcp.destroy();
    });
    ws.on("error", () => tcp.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("listening", resolve);
    server.once("error", reject);
  });
  const { port } = server.address() as { port: number };
  return {
    address: `127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const ws of sockets) ws.terminate();
        server.close(() => resolve());
      }),
  };
}
