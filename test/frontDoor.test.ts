// The local stack's front door (cli/dev/frontDoor.ts): what `npm start` listens on, in front of the
// Worker in workerd. Through wrangler's own proxy, which forwards over pooled keep-alive
// connections, under load 10 to 61 of 3,000 appends from 200 producers per run were refused
// (503 "Your worker restarted mid-request", none written): a request sent on a pooled connection
// that workerd had just closed for idleness is lost before the Worker sees it.
import { createServer as createHttpServer, type IncomingHttpHeaders } from "node:http";
import { createServer as createNetServer, type Server } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { startFrontDoor, type FrontDoor } from "../cli/dev/frontDoor.js";
import { holdConnection } from "./helpers/heldConnection.js";

const closing: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

async function listening(server: Server | ReturnType<typeof createHttpServer>): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  closing.push(() => new Promise((resolve) => server.close(resolve)));
  return (server.address() as { port: number }).port;
}

async function frontDoor(upstreamPort: number, log?: (line: string) => void): Promise<FrontDoor> {
  const front = await startFrontDoor({ upstream: () => ({ hostname: "127.0.0.1", port: upstreamPort }), log });
  closing.push(() => front.close());
  return front;
}

/**
 * A Worker that closes a connection as soon as it is reused: it answers the first request on each
 * connection (keep-alive) and drops the connection, unanswered, when a second one arrives on it —
 * what a request sent on a connection workerd closed for idleness meets, at every reuse.
 */
async function closingOnReuse() {
  let connections = 0;
  let lost = 0;
  const server = createNetServer((socket) => {
    connections++;
    let buffered = "";
    let answered = false;
    socket.on("data", (chunk) => {
      buffered += chunk.toString("latin1");
      if (!buffered.includes("\r\n\r\n")) return;
      if (answered) {
        lost++;
        socket.destroy();
        return;
      }
      const length = Number(/content-length: *(\d+)/i.exec(buffered)?.[1] ?? 0);
      if (buffered.length < buffered.indexOf("\r\n\r\n") + 4 + length) return;
      answered = true;
      buffered = "";
      const body = '{"ok":true}';
      socket.write(
        `HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: keep-alive\r\n\r\n${body}`,
      );
    });
    socket.on("error", () => undefined);
  });
  const port = await listening(server);
  return { port, connections: () => connections, lost: () => lost };
}

const append = (url: string, i: number) =>
  fetch(`${url}/streams/s/events`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ events: [{ name: "E", data: { i } }] }),
  }).then(async (response) => ({ status: response.status, body: await response.text() }));

describe("front door", () => {
  it("never sends a request on a connection the Worker may have closed: each goes on a connection of its own", async () => {
    const worker = await closingOnReuse();
    const front = await frontDoor(worker.port);
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push(await append(front.url, i)); // one after the other
    answers.push(...(await Promise.all(Array.from({ length: 50 }, (_, i) => append(front.url, 10 + i))))); // at once
    expect(answers.filter((a) => a.status !== 201)).toEqual([]);
    expect(worker.lost()).toBe(0);
    expect(worker.connections()).toBe(60);
  });

  it("keeps a client's idle connection open longer than clients keep theirs: a request on it after 6 s is answered", async () => {
    // workerd, as wrangler's dev server, closes a connection idle for 5 s
    const port = await listening(createHttpServer((_request, response) => response.end("ok")));
    const front = await frontDoor(port);
    const held = await holdConnection(front.url);
    try {
      expect((await held.request("GET", "/health")).status).toBe(200);
      await sleep(6000);
      const again = await held.request("GET", "/health");
      expect(again.error).toBeUndefined();
      expect(again).toMatchObject({ status: 200, body: "ok" });
    } finally {
      held.close();
    }
  }, 15_000);

  it("passes requests and answers as they are, but not hop-by-hop headers or miniflare's MF-* headers", async () => {
    let seen: { method?: string; url?: string; headers: IncomingHttpHeaders; body: string } | undefined;
    const port = await listening(
      createHttpServer((request, response) => {
        let body = "";
        request.on("data", (chunk) => (body += chunk));
        request.on("end", () => {
          seen = { method: request.method, url: request.url, headers: request.headers, body };
          response.writeHead(207, "Multi", [
            "Set-Cookie",
            "a=1",
            "Set-Cookie",
            "b=2",
            "X-Answer",
            "yes",
            "Keep-Alive",
            "timeout=7",
          ]);
          response.end("answer");
        });
      }),
    );
    const lines: string[] = [];
    const front = await frontDoor(port, (line) => lines.push(line));
    const response = await fetch(`${front.url}/a/b%2Fc?x=1&y=%20`, {
      method: "PUT",
      headers: {
        "content-type": "text/plain",
        "cf-connecting-ip": "198.51.100.7",
        "mf-original-url": "https://elsewhere.example/",
        "MF-Proxy-Shared-Secret": "guess",
        "x-custom": "kept",
      },
      body: "the body",
    });
    expect(response.status).toBe(207);
    expect(await response.text()).toBe("answer");
    expect(response.headers.getSetCookie()).toEqual(["a=1", "b=2"]);
    expect(response.headers.get("x-answer")).toBe("yes");
    expect(response.headers.get("keep-alive")).toBe("timeout=60"); // the front door's own, not the Worker's
    expect(seen).toMatchObject({ method: "PUT", url: "/a/b%2Fc?x=1&y=%20", body: "the body" });
    expect(seen?.headers).toMatchObject({
      host: new URL(front.url).host, // the client's: the Worker sees the URL the client used
      "content-type": "text/plain",
      "cf-connecting-ip": "198.51.100.7",
      "x-custom": "kept",
    });
    expect(Object.keys(seen?.headers ?? {}).filter((name) => name.startsWith("mf-"))).toEqual([]);
    expect(lines).toEqual([expect.stringMatching(/^PUT \/a\/b%2Fc\?x=1&y=%20 207 Multi-Status \(\d+ms\)$/)]);
  });

  it("answers 502 problem+json when the Worker does not answer", async () => {
    const port = await listening(createNetServer((socket) => socket.destroy()));
    const front = await frontDoor(port);
    const response = await fetch(`${front.url}/health`);
    expect(response.status).toBe(502);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    expect(await response.json()).toMatchObject({ type: "urn:corq:problem:bad_gateway", status: 502 });
  });
});
