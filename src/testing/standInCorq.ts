// `ctx.corq` in a handler's unit test: policies and process managers append with it. The stand-in
// keeps what they append in memory, with the real append's rules — the same input validation and
// the same expectedVersion check (CorqError "version_conflict") — so an idempotent "append with
// expectedVersion -1" can be tested by calling the handler twice. Every other method throws,
// saying how to supply it: a test passes its own functions, or a real corq.
import { parseEvents, parseOrThrow, streamName } from "../config.js";
import { CorqError } from "../errors.js";
import type { AppendResult, Corq, EventInput, StoredEvent } from "../types.js";
import { TEST_EPOCH } from "./deliveredEvents.js";

/** One `ctx.corq.append` call the handler made (and the stand-in accepted). */
export interface RecordedAppend {
  stream: string;
  events: EventInput[];
  expectedVersion?: number;
  result: AppendResult;
}

// Every method of Corq, so the stand-in has each (the type checker fails here when Corq grows).
const methods: Record<keyof Corq, true> = {
  migrate: true,
  append: true,
  readStream: true,
  readLog: true,
  eraseStream: true,
  advance: true,
  consume: true,
  drain: true,
  stats: true,
  subscription: true,
  keys: true,
  keyPage: true,
  key: true,
  pauseKey: true,
  resumeKey: true,
  rewind: true,
  deadLetters: true,
  releaseDeadLetters: true,
  putSubscription: true,
  deleteSubscription: true,
  pause: true,
  resume: true,
  activity: true,
  throughput: true,
  pruneActivity: true,
  logTail: true,
  timeline: true,
  metrics: true,
  doctor: true,
  putAlert: true,
  alerts: true,
  deleteAlert: true,
  checkAlerts: true,
  createToken: true,
  listTokens: true,
  revokeToken: true,
  verifyToken: true,
  retention: true,
  setRetention: true,
  runRetention: true,
  close: true,
};

/**
 * A Corq whose `append` writes to an in-memory log (recorded in `appended`) and whose
 * `readStream` reads it; `overrides` replace any method (or pass a whole real corq instead).
 */
export function standInCorq(appended: RecordedAppend[], overrides: Partial<Corq> = {}): Corq {
  const log: StoredEvent[] = [];
  const versions = new Map<string, number>();
  const own: Partial<Corq> = {
    async append(stream, events, options = {}) {
      parseOrThrow(streamName, stream, "invalid_input", "stream");
      const input = parseEvents(events);
      const current = versions.get(stream);
      const { expectedVersion } = options;
      if (expectedVersion !== undefined && (current ?? -1) !== expectedVersion) {
        const actual = current === undefined ? "does not exist" : `is at version ${current}`;
        throw new CorqError("version_conflict", `stream "${stream}" ${actual}, expected ${expectedVersion}`, {
          details: { stream, expectedVersion, actualVersion: current ?? -1 },
          extra: { currentVersion: current ?? null },
        });
      }
      const positions = input.map((event, index) => {
        const position = log.length + 1;
        log.push({
          position,
          stream,
          version: (current ?? -1) + 1 + index,
          name: event.name,
          data: event.data,
          meta: (event.meta ?? {}) as StoredEvent["meta"], // checked as JSON by parseEvents
          createdAt: new Date(Date.parse(TEST_EPOCH) + position * 1000).toISOString(),
        });
        return position;
      });
      const version = (current ?? -1) + input.length;
      versions.set(stream, version);
      const result = { stream, version, positions };
      appended.push({ stream, events: input, ...(expectedVersion === undefined ? {} : { expectedVersion }), result });
      return result;
    },
    async readStream(stream, options = {}) {
      const from = options.from ?? 0;
      const mine = log.filter((event) => event.stream === stream && event.version >= from);
      return mine.slice(0, options.limit ?? mine.length);
    },
  };
  const corq: Record<string, unknown> = {};
  for (const name of Object.keys(methods) as (keyof Corq)[])
    corq[name] = overrides[name] ?? own[name] ?? notStubbed(name);
  return corq as unknown as Corq;
}

function notStubbed(name: string) {
  return () => {
    throw new Error(
      `handlerContext: ctx.corq.${name} is not part of the test kit's stand-in (it has append and readStream); ` +
        `pass handlerContext({ corq: { ${name}: async (…) => … } }), or a real corq`,
    );
  };
}
