// greeter — a policy, keyed by stream: when a visitor registers, welcome them once.
//
// The welcome is an event of its own stream, `welcome-<visitor>`, appended with
// expectedVersion -1: the stream's name is the effect's identity, so a redelivered batch (a
// crash after the append, before the ack) finds it there and moves on — exactly one welcome
// per visitor, without any state to read first. The name is derived by `derivedStream`: a
// visitor stream of 200 characters still gets a valid one.
import { CorqError, defineSubscription, type EventInput } from "../src/index.js";
import type { VisitorEvents } from "./events.js";
import { derivedStream, VISITOR_STREAMS } from "./streamNames.js";

export const greeter = defineSubscription<VisitorEvents>()({
  name: "greeter",
  events: ["Registered"],
  streams: VISITOR_STREAMS, // visitors register in their own streams: a stranger's stream gets no welcome
  key: "stream",
  async handle(events, { corq }) {
    // every event of the batch is this visitor's; one welcome per visitor, for the first Registered
    const [first] = events;
    if (first === undefined) return; // corq never hands over an empty batch
    const data = first.data as { name?: unknown } | null; // as sent: the log is open (events.ts)
    const welcome: EventInput<VisitorEvents, "Welcomed"> = {
      name: "Welcomed",
      data: { visitor: first.stream, name: typeof data?.name === "string" ? data.name : null },
      // what caused it, by the event's identity (stream, version): how a reader deduplicates
      meta: { causation: { stream: first.stream, version: first.version } },
    };
    await corq.append(await welcomeStream(first.stream), [welcome], { expectedVersion: -1 }).catch(alreadyThere);
  },
});

export const welcomeStream = (visitor: string) => derivedStream("welcome", visitor);

/** expectedVersion -1 refused: the stream exists, so this effect happened before. */
export function alreadyThere(error: unknown): void {
  if (!(error instanceof CorqError && error.code === "version_conflict")) throw error;
}
