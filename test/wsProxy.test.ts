import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer, type Server } from "node:net";
import WebSocket from "ws";
import { startWsProxy, type WsProxy } from "../cli/dev/wsProxy.js";
import { present } from "./helpers/present.js";

// The proxy in front of the local Postgres, against a TCP echo server standing in for it.
describe("WebSocket→TCP proxy", () => {
  let echo: Server;
  let target: { host: string; port: number };
  let proxy: WsProxy;
  beforeAll(async () => {
    echo = createServer((socket) => socket.pipe(socket));
    await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
    target = { host: "127.0.0.1", port: (echo.address() as { port: number }).port };
    proxy = await startWsProxy(target);
  });
  afterAll(async () => {
    await proxy?.close();
    await new Promise((resolve) => echo?.close(resolve));
  });

  /** Opens ws://<path>; resolves with what the echo sent back, or the HTTP status of a refusal. */
  const open = (path: string, headers: Record<string, string> = {}) =>
    new Promise<{ echoed: string } | { status: number }>((resolve, reject) => {
      const ws = new WebSocket(`ws://${path}`, { headers });
      ws.on("unexpected-response", (_request, response) => resolve({ status: response.statusCode ?? 0 }));
      ws.on("open", () => ws.send(Buffer.from("ping")));
      ws.on("message", (data) => {
        resolve({ echoed: String(data) });
        ws.close();
      });
      ws.on("close", (code) => resolve({ status: code })); // a close before any echo (the first resolve wins)
      ws.on("error", (error) => (error.message.includes("Unexpected server response") ? undefined : reject(error)));
    });
  const address = () => `address=${target.host}:${target.port}`;
  // the address is host:port/token
  const [hostPort, token] = [
    () => present(proxy.address.split("/")[0], "a host:port in the proxy's address"),
    () => present(proxy.address.split("/")[1], "a token in the proxy's address"),
  ];

  it("listens on 127.0.0.1 and carries a random path token in its address", async () => {
    expect(proxy.address).toMatch(/^127\.0\.0\.1:\d+\/[\w-]{32}$/);
    const other = await startWsProxy(target);
    expect(other.address.split("/")[1]).not.toBe(token());
    await other.close();
  });

  it("forwards to the configured Postgres with the token and no Origin (what the Neon driver in workerd sends)", async () => {
    expect(await open(`${proxy.address}/v1?${address()}`)).toEqual({ echoed: "ping" });
  });

  it("refuses an upgrade without the token or with a wrong one", async () => {
    expect(await open(`${hostPort()}/v1?${address()}`)).toEqual({ status: 403 });
    expect(
      await open(`${hostPort()}/${token().replace(/^./, (c) => (c === "a" ? "b" : "a"))}/v1?${address()}`),
    ).toEqual({ status: 403 });
  });

  it("refuses an upgrade from a web page (an Origin header), even with the token", async () => {
    expect(await open(`${proxy.address}/v1?${address()}`, { origin: "https://evil.example" })).toEqual({ status: 403 });
    expect(await open(`${proxy.address}/v1?${address()}`, { origin: "null" })).toEqual({ status: 403 });
  });

  it("connects to nothing but the configured address", async () => {
    expect(await open(`${proxy.address}/v1?address=127.0.0.1:22`)).toEqual({ status: 403 });
    expect(await open(`${proxy.address}/v1`)).toEqual({ status: 403 });
  });
});
