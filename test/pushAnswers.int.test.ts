// What a push receiver's answer means when the network gets in the way (docs/tour.md, "Push
// subscriptions"): a 2xx whose body the connection cuts is a failed attempt, never an ack; a
// body that never ends is read to 64 KiB and no further — a JSON one fails the attempt, any
// other type acks — and the verdict comes before the delivery timeout.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useCorq } from "./helpers/corq.js";

const openCorq = useCorq();
const open = () => openCorq({ pushAllowPrivate: true }); // the receiver listens on 127.0.0.1

type Answer = (request: IncomingMessage, response: ServerResponse) => void;
let answer: Answer = (_, response) => response.end();
const bodies: string[] = [];
/** Bytes of the endless answer written before the connection closed. */
let written = 0;
const server = createServer((request, response) => {
  let body = "";
  request.on("data", (chunk) => (body += chunk));
  request.on("end", () => {
    bodies.push(body);
    answer(request, response);
  });
});
let url = "";
beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const cutMidBody =
  (contentType: string): Answer =>
  (_, response) => {
    response.writeHead(200, { "content-type": contentType, "content-length": "1000" });
    response.write('{"ackedThrough": ');
    setTimeout(() => response.socket?.destroy(), 50); // the rest never comes: the connection drops
  };

const endless =
  (contentType: string): Answer =>
  (_, response) => {
    response.writeHead(200, { "content-type": contentType }); // chunked: no length announced
    const chunk = Buffer.alloc(16 * 1024, "x");
    const more = () => {
      while (!response.destroyed) {
        written += chunk.length;
        if (!response.write(chunk)) break;
      }
      if (!response.destroyed) response.once("drain", more);
    };
    more();
  };

describe("push answers cut or endless", () => {
  it("counts a 2xx whose body the connection cuts as a failed attempt, whatever the content type", async () => {
    const { corq } = await open();
    await corq.putSubscription("cut", {
      maxAttempts: 5,
      backoff: { initialMs: 0, maxMs: 0, factor: 1 },
      deliver: { url, timeoutMs: 5000 },
    });
    await corq.append("visitor-1", [{ name: "E", data: {} }]);
    await corq.advance();
    for (const type of ["application/json", "text/plain"]) {
      answer = cutMidBody(type);
      expect(await corq.consume("cut"), type).toMatchObject({ outcome: "retry", error: "Error: could not connect" });
      expect((await corq.subscription("cut")).pending, type).toBe(1);
    }
    answer = (_, response) => response.end();
    expect(await corq.consume("cut")).toMatchObject({ outcome: "acked" });
    // each delivery carries what a receiver deduplicates by: the event's stream and version
    expect(JSON.parse(bodies.at(-1)!).events).toMatchObject([{ stream: "visitor-1", version: 0 }]);
  });

  it("reads an endless body to 64 KiB and stops: JSON fails the attempt, text acks, before the timeout", async () => {
    const { corq } = await open();
    await corq.putSubscription("endless", {
      maxAttempts: 5,
      backoff: { initialMs: 0, maxMs: 0, factor: 1 },
      deliver: { url, timeoutMs: 10_000 },
    });
    await corq.append("k", [{ name: "E", data: {} }]);
    await corq.advance();
    const cases = [
      ["application/json", { outcome: "retry", error: "Error: response too large (over 64 KiB)" }],
      ["text/plain", { outcome: "acked" }],
    ] as const;
    for (const [type, expected] of cases) {
      written = 0;
      answer = endless(type);
      // reading it all would end in "timeout after 10000 ms" (or never)
      expect(await corq.consume("endless"), type).toMatchObject(expected);
      // what the receiver could write before corq hung up: 64 KiB read, plus what the sockets buffer
      expect(written, type).toBeLessThan(16 * 1024 * 1024);
    }
    expect((await corq.subscription("endless")).pending).toBe(0);
  });
});
