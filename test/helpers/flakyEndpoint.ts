// An HTTP front for the local Neon HTTP SQL endpoint (cli/dev/httpSqlEndpoint.ts) that answers
// chosen requests itself, with a status and body of its choosing, as Neon's proxy does while a
// compute wakes (503 "couldn't connect to compute"), at its rate limit (429), for an oversized
// result (507), or when the connection to the compute broke mid-request (502). Every other request
// is passed on to the real endpoint and its answer passed back.
import { createServer } from "node:http";

export interface FlakyAnswer {
  /** Requests whose body (the statement's JSON) matches are answered so. */
  match: RegExp;
  status: number;
  body: string;
  /** How many matching requests are answered so (default 1; Infinity: all). */
  count?: number;
}

export interface FlakyEndpoint {
  /** The value for CORQ_NEON_HTTP_ENDPOINT. */
  url: string;
  /** Where requests that are not answered here go (the real endpoint's URL). */
  forwardTo(url: string): void;
  /** Answer the next matching requests so (replaces any earlier plan). */
  answer(plan: FlakyAnswer): void;
  /** Requests answered by the plan so far, and requests whose body matched `match`, answered or passed on. */
  answered(): number;
  matched(match: RegExp): number;
  close(): Promise<void>;
}

export async function startFlakyEndpoint(): Promise<FlakyEndpoint> {
  let target: string | undefined;
  let plan: (FlakyAnswer & { count: number }) | undefined;
  let answered = 0;
  const bodies: string[] = [];
  const server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString("utf8");
    bodies.push(body);
    if (plan && plan.count > 0 && plan.match.test(body)) {
      plan.count--;
      answered++;
      response.writeHead(plan.status, { "content-type": "text/plain" }).end(plan.body);
      return;
    }
    if (!target) {
      response.writeHead(500).end("no endpoint to forward to");
      return;
    }
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(request.headers))
      if (typeof value === "string" && !["host", "content-length", "connection"].includes(name)) headers[name] = value;
    const upstream = await fetch(target, { method: request.method, headers, body });
    response
      .writeHead(upstream.status, { "content-type": upstream.headers.get("content-type") ?? "application/json" })
      .end(Buffer.from(await upstream.arrayBuffer()));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/sql`,
    forwardTo: (url) => {
      target = url;
    },
    answer: (next) => {
      plan = { ...next, count: next.count ?? 1 };
    },
    answered: () => answered,
    matched: (match) => bodies.filter((body) => match.test(body)).length,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
