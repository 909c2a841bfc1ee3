// A TCP proxy in front of the test Postgres that can end chosen connections the way a compute
// suspend or restart does, at the worst moment for a pool: right after the server said the new
// connection is ready. The server's ReadyForQuery and an ErrorResponse FATAL 57P01
// ("terminating connection due to administrator command") leave in ONE write, then the socket
// closes. node-postgres parses both in one pass: the connect callback (where pg-pool lends the
// client and removes its idle 'error' listener) runs first, the FATAL is emitted next, before
// the borrower's `await pool.connect()` resumes (DESIGN invariant 14, issue 48).
import { createServer, connect, type Socket } from "node:net";

export interface TerminatingProxy {
  /** `databaseUrl` with its host and port replaced by the proxy's. */
  url: string;
  port: number;
  /** The next `count` connections opened through the proxy end right after they are ready. */
  terminateNext(count?: number): void;
  /** Which connections (1 = the first opened through the proxy) end that way from now on (replaces terminateNext's count). */
  terminateWhere(which: (ordinal: number) => boolean): void;
  /**
   * The next `count` statements whose text matches `text`, on any connection, are not passed on:
   * the client gets FATAL 57P01 in their place and the connection closes (a backend terminated
   * while the statement was on its way: it never ran).
   */
  terminateStatements(text: RegExp, count?: number): void;
  /**
   * The next `count` statements whose text matches `text` are passed on and run (and commit), but
   * the connection is cut when their answer is complete: the client reads a closed socket and no
   * answer (a connection lost while the statement was out: whether it committed is unknown to it).
   */
  cutAnswers(text: RegExp, count?: number): void;
  /** Connections ended that way so far (by terminateNext / terminateWhere / terminateStatements). */
  terminated(): number;
  /** Connections opened through the proxy so far. */
  opened(): number;
  close(): Promise<void>;
}

const SSL_REQUEST = 80877103;

export async function startTerminatingProxy(databaseUrl: string): Promise<TerminatingProxy> {
  const target = new URL(databaseUrl);
  let pending = 0;
  let which: (ordinal: number) => boolean = () => false;
  let opened = 0;
  let terminated = 0;
  let statements: { text: RegExp; count: number } | undefined;
  let answersCut: { text: RegExp; count: number } | undefined;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const ordinal = ++opened;
    const terminate = pending > 0 || which(ordinal);
    if (pending > 0) pending--;
    const upstream = connect(Number(target.port || 5432), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.setNoDelay(true);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => undefined);
    }
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    // the client's first packet says whether the server's first answer is one byte (SSLRequest: 'N'/'S')
    let sslRequest: boolean | undefined;
    // a statement whose answer is to be cut is out: what the server answers is held, not passed
    let cutting: Buffer | undefined;
    client.on("data", (chunk) => {
      sslRequest ??= chunk.length >= 8 && chunk.readInt32BE(4) === SSL_REQUEST;
      if (statements && statements.count > 0 && statements.text.test(chunk.toString("latin1"))) {
        statements.count--;
        terminated++;
        client.end(fatal57P01());
        upstream.destroy();
        return;
      }
      if (answersCut && answersCut.count > 0 && answersCut.text.test(chunk.toString("latin1"))) {
        answersCut.count--;
        cutting = Buffer.alloc(0);
      }
      upstream.write(chunk);
    });
    if (!terminate) {
      upstream.on("data", (chunk) => {
        if (cutting === undefined) {
          client.write(chunk);
          return;
        }
        // the statement ran: once its ReadyForQuery is in (its transaction ended), the client is cut
        cutting = Buffer.concat([cutting, chunk]);
        if (readyForQueryEnd(cutting) === undefined) return;
        terminated++;
        client.destroy();
        upstream.destroy();
      });
      return;
    }
    let held = Buffer.alloc(0);
    let answeredSsl = false;
    const pass = (chunk: Buffer) => client.write(chunk);
    upstream.on("data", function cut(chunk: Buffer) {
      held = Buffer.concat([held, chunk]);
      if (sslRequest && !answeredSsl) {
        // the one-byte answer to SSLRequest: 'N' goes on in plain text; 'S' (TLS) cannot be read here
        answeredSsl = true;
        const answer = held.subarray(0, 1);
        held = held.subarray(1);
        client.write(answer);
        if (answer[0] === 0x53) {
          upstream.off("data", cut).on("data", pass);
          if (held.length > 0) pass(held);
          return;
        }
      }
      const end = readyForQueryEnd(held);
      if (end === undefined) {
        // authentication goes on as usual: only the ready connection is cut
        const whole = wholeMessages(held);
        client.write(held.subarray(0, whole));
        held = held.subarray(whole);
        return;
      }
      terminated++;
      upstream.off("data", cut);
      client.end(Buffer.concat([held.subarray(0, end), fatal57P01()]));
      upstream.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  const url = new URL(databaseUrl);
  url.hostname = "127.0.0.1";
  url.port = String(port);
  return {
    url: url.toString(),
    port,
    terminateNext(count = 1) {
      pending += count;
    },
    terminateWhere(next) {
      which = next;
      pending = 0;
    },
    terminateStatements(text, count = 1) {
      statements = { text, count };
    },
    cutAnswers(text, count = 1) {
      answersCut = { text, count };
    },
    terminated: () => terminated,
    opened: () => opened,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** The length of the whole backend messages at the start of `buffer` (type byte + int32 length each). */
function wholeMessages(buffer: Buffer): number {
  let at = 0;
  while (at + 5 <= buffer.length) {
    const end = at + 1 + buffer.readInt32BE(at + 1);
    if (end > buffer.length) break;
    at = end;
  }
  return at;
}

/** Where the first ReadyForQuery ('Z') in `buffer` ends, if it arrived whole. */
function readyForQueryEnd(buffer: Buffer): number | undefined {
  let at = 0;
  while (at + 5 <= buffer.length) {
    const end = at + 1 + buffer.readInt32BE(at + 1);
    if (end > buffer.length) return undefined;
    if (buffer[at] === 0x5a) return end;
    at = end;
  }
  return undefined;
}

/** ErrorResponse: severity FATAL, SQLSTATE 57P01, as Postgres sends it at a fast shutdown or pg_terminate_backend. */
function fatal57P01(): Buffer {
  const field = (code: string, value: string) => Buffer.concat([Buffer.from(code), Buffer.from(`${value}\0`)]);
  const body = Buffer.concat([
    field("S", "FATAL"),
    field("V", "FATAL"),
    field("C", "57P01"),
    field("M", "terminating connection due to administrator command"),
    Buffer.from([0]),
  ]);
  const header = Buffer.alloc(5);
  header.write("E", 0);
  header.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([header, body]);
}
