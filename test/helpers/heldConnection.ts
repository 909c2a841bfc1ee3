// One HTTP/1.1 keep-alive connection held by hand, as a client's connection pool holds it: requests
// go one after the other on the same socket, and a request is written whether or not the server
// has closed the connection meanwhile — as a pooled client does whose own idle limit has not come
// yet. A server that closes idle connections sooner than its clients do loses that request: the
// answer is `{ status: 0 }` with what happened to the socket.
import { connect, type Socket } from "node:net";

export interface HeldAnswer {
  /** 0: no answer (the connection was closed or reset). */
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Why there is no answer. */
  error?: string;
}

export interface HeldConnection {
  request(
    method: string,
    path: string,
    options?: { headers?: Record<string, string>; body?: string },
  ): Promise<HeldAnswer>;
  /** The server sent its FIN (or reset the connection). */
  closedByServer(): boolean;
  close(): void;
}

export async function holdConnection(url: string): Promise<HeldConnection> {
  const { hostname, port, host } = new URL(url);
  const socket: Socket = connect(Number(port), hostname);
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  let closed = false;
  let received = Buffer.alloc(0);
  let waiting: (() => void) | undefined;
  const wake = () => {
    const resolve = waiting;
    waiting = undefined;
    resolve?.();
  };
  socket.on("data", (chunk: Buffer) => {
    received = Buffer.concat([received, chunk]);
    wake();
  });
  let socketError: string | undefined;
  socket.on("error", (error) => {
    socketError = error.message;
    closed = true;
    wake();
  });
  socket.on("end", () => {
    closed = true;
    wake();
  });
  socket.on("close", () => {
    closed = true;
    wake();
  });
  const more = () => new Promise<void>((resolve) => (waiting = resolve));

  /** One complete answer from `received` (Content-Length or chunked), or undefined if not all there yet. */
  const parse = (): HeldAnswer | undefined => {
    const end = received.indexOf("\r\n\r\n");
    if (end < 0) return undefined;
    const [statusLine = "", ...lines] = received.subarray(0, end).toString("latin1").split("\r\n");
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(":");
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const status = Number(statusLine.split(" ")[1]);
    let rest = received.subarray(end + 4);
    if (headers["transfer-encoding"]?.toLowerCase() === "chunked") {
      const parts: Buffer[] = [];
      for (;;) {
        const lineEnd = rest.indexOf("\r\n");
        if (lineEnd < 0) return undefined;
        const size = Number.parseInt(rest.subarray(0, lineEnd).toString("latin1"), 16);
        if (rest.length < lineEnd + 2 + size + 2) return undefined;
        if (size === 0) {
          received = rest.subarray(lineEnd + 4);
          return { status, headers, body: Buffer.concat(parts).toString("utf8") };
        }
        parts.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
        rest = rest.subarray(lineEnd + 2 + size + 2);
      }
    }
    const length = Number(headers["content-length"] ?? 0);
    if (rest.length < length) return undefined;
    received = rest.subarray(length);
    return { status, headers, body: rest.subarray(0, length).toString("utf8") };
  };

  return {
    async request(method, path, options = {}) {
      const body = options.body ?? "";
      const headers = {
        host,
        connection: "keep-alive",
        "content-length": String(Buffer.byteLength(body)),
        ...options.headers,
      };
      const head = Object.entries(headers)
        .map(([name, value]) => `${name}: ${value}\r\n`)
        .join("");
      // written even if the server closed the connection: the write fails or the answer never comes
      socket.write(`${method} ${path} HTTP/1.1\r\n${head}\r\n${body}`, () => undefined);
      for (;;) {
        const answer = parse();
        if (answer) return answer;
        if (closed) {
          const what = socketError ?? "the server closed the connection";
          return { status: 0, headers: {}, body: "", error: what };
        }
        await more();
      }
    },
    closedByServer: () => closed,
    close: () => socket.destroy(),
  };
}
