// What the local stack listens on (`npm start`'s port): a plain HTTP forwarder in front of the
// Worker's own address in workerd.
//
// Why not wrangler's dev server port: wrangler puts a proxy Worker of its own (its ProxyWorker,
// in a second workerd) in front of the user's Worker, and it forwards every request over a pooled
// keep-alive connection. workerd closes a connection that sat idle for 5 s, and the proxy keeps
// idle connections in its pool about as long: under load, a request is sometimes written into a
// connection the Worker has just closed. It never reaches the Worker, and for anything but GET
// or HEAD the proxy answers 503 "Your worker restarted mid-request" (nothing restarted). Its own
// clients meet the same 5 s idle close: Node's fetch keeps an idle connection 4 s, and a timer
// late on a loaded machine reuses one that workerd closed ("other side closed", no answer).
// Measured with 200 concurrent producers, 3,000 single-event appends per run, at load 6 to 13:
// 86 to 177 per run failed that way (10 to 61 with the 503, 60 to 131 with no answer), none of
// them written; through this forwarder, 0 of 18,000.
//
// So here: each request reaches the Worker over a connection of its own (`agent: false`: nothing
// pooled to lose; a connect on loopback costs about 0.1 ms), and a client's connection may stay
// idle 60 s, longer than clients keep theirs (Node's fetch 4 s, workerd 5 s), so that the client
// is the one that closes it. Requests and answers pass as they are (the Host header too: the
// Worker sees the URL the client used, as behind wrangler's proxy), except hop-by-hop headers
// and miniflare's own `MF-*` control headers, which a client must not set.
import { createServer, request, STATUS_CODES, type IncomingMessage, type OutgoingHttpHeaders } from "node:http";

export interface FrontDoor {
  /** http://127.0.0.1:<port> */
  url: string;
  close(): Promise<void>;
}

export interface FrontDoorOptions {
  /** 0 (the default): any free port. */
  port?: number;
  /** The Worker's own address (asked at each request: a reload may move it). */
  upstream: () => { hostname: string; port: string | number };
  /** How long a client's connection may stay idle (default 60 s). */
  idleMs?: number;
  /** One line per request answered, `POST /streams/a/events 201 Created (12ms)` (the local cron's are left out). */
  log?: (line: string) => void;
}

// RFC 9110 §7.6.1 and the usual others; `expect`: this server answers 100-continue itself
const hopByHop = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "expect",
]);

/** Raw headers (name, value, name, value …) without hop-by-hop ones, and without `MF-*` when `fromClient`. */
function passing(raw: string[], fromClient: boolean): string[] {
  const kept: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string;
    const lower = name.toLowerCase();
    if (hopByHop.has(lower) || (fromClient && lower.startsWith("mf-"))) continue;
    kept.push(name, raw[i + 1] as string);
  }
  return kept;
}

export async function startFrontDoor(options: FrontDoorOptions): Promise<FrontDoor> {
  const server = createServer((incoming: IncomingMessage, response) => {
    const target = options.upstream();
    const started = Date.now();
    if (options.log && !incoming.url?.startsWith("/__scheduled"))
      response.on("finish", () =>
        options.log?.(
          `${incoming.method} ${incoming.url} ${response.statusCode} ${STATUS_CODES[response.statusCode] ?? ""} (${Date.now() - started}ms)`,
        ),
      );
    const forwarded = request({
      host: target.hostname,
      port: target.port,
      method: incoming.method,
      path: incoming.url,
      headers: passing(incoming.rawHeaders, true) as unknown as OutgoingHttpHeaders,
      setHost: false, // the client's Host, in the headers above
      agent: false, // a connection of its own, closed after the answer
    });
    forwarded.on("response", (answer) => {
      response.writeHead(answer.statusCode ?? 502, answer.statusMessage, passing(answer.rawHeaders, false));
      answer.pipe(response);
      answer.on("error", (error) => response.destroy(error));
    });
    forwarded.on("error", (error) => {
      if (response.headersSent) return void response.destroy(error);
      const body = JSON.stringify({
        type: "urn:corq:problem:bad_gateway",
        title: "Bad Gateway",
        status: 502,
        detail: `the local Worker did not answer: ${error.message}`,
      });
      response.writeHead(502, {
        "content-type": "application/problem+json",
        "content-length": Buffer.byteLength(body),
      });
      response.end(body);
    });
    // a client that went away: the Worker's request goes too (as a closed connection tells workerd)
    response.on("close", () => {
      if (!response.writableFinished) forwarded.destroy();
    });
    incoming.on("error", () => forwarded.destroy());
    incoming.pipe(forwarded);
  });
  const idleMs = options.idleMs ?? 60_000;
  server.keepAliveTimeout = idleMs;
  server.headersTimeout = idleMs + 1000; // Node's limit on a request's headers, kept above it
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as { port: number };
  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}
