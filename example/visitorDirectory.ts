// visitor-directory — a projection into a table (example.visitors), keyed by stream: one
// visitor's events, in order.
//
// Right by construction: each field group keeps the stream version it was written from —
// the name (Registered) and the place (Arrived / Departed) — and is only overwritten by a
// newer version. A redelivered batch changes nothing; an Arrived that comes before its
// Registered leaves the name for the Registered to fill in, and the Registered does not undo
// the arrival. The batch is folded into one row first: one statement per batch.
import { sql } from "drizzle-orm";
import { defineSubscription, type DeliveredEvent } from "../src/index.js";
import type { VisitorEvents } from "./events.js";
import { VISITOR_STREAMS } from "./streamNames.js";

/** One of a visitor's events as the handler gets it (with its seq). */
type Visit = DeliveredEvent<VisitorEvents, "Registered" | "Arrived" | "Departed">;

export const visitorDirectory = defineSubscription<VisitorEvents>()({
  name: "visitor-directory",
  events: ["Registered", "Arrived", "Departed"],
  streams: VISITOR_STREAMS, // the directory lists visitors, one row per visitor stream
  key: "stream",
  async handle(events, { run }) {
    await run(projectVisitor(fold(events)));
  },
});

interface Folded {
  stream: string;
  /** the newest Registered of the batch, by version */
  registered?: Visit;
  /** the newest Arrived or Departed */
  moved?: Visit;
  /** the newest event of any kind */
  last: Visit;
}

function fold(events: Visit[]): Folded {
  const newer = (a: Visit | undefined, b: Visit) => (a === undefined || b.version > a.version ? b : a);
  const [first] = events;
  if (first === undefined) throw new Error("example: a batch has at least one event");
  const folded: Folded = { stream: first.stream, last: first };
  for (const event of events) {
    folded.last = newer(folded.last, event);
    if (event.name === "Registered") folded.registered = newer(folded.registered, event);
    else folded.moved = newer(folded.moved, event);
  }
  return folded;
}

/** One upsert; each field group written only from a version above the one it holds. */
function projectVisitor({ stream, registered, moved, last }: Folded) {
  const name = (registered?.data as { name?: unknown } | undefined)?.name;
  const arrived = moved?.name === "Arrived";
  const room = arrived ? (moved.data as { roomId?: unknown }).roomId : null;
  return sql`
    INSERT INTO example.visitors AS v
      (stream, name, name_version, room, status, moved_version, last_version, last_position)
    VALUES (
      ${stream}, ${typeof name === "string" ? name : null}, ${registered?.version ?? null}::integer,
      ${room == null ? null : String(room)}, ${moved ? (arrived ? "in-room" : "left") : "registered"},
      ${moved?.version ?? null}::integer, ${last.version}, ${last.position})
    ON CONFLICT (stream) DO UPDATE SET
      name = CASE WHEN excluded.name_version > coalesce(v.name_version, -1) THEN excluded.name ELSE v.name END,
      name_version = greatest(v.name_version, excluded.name_version),
      room = CASE WHEN excluded.moved_version > coalesce(v.moved_version, -1) THEN excluded.room ELSE v.room END,
      status = CASE WHEN excluded.moved_version > coalesce(v.moved_version, -1) THEN excluded.status ELSE v.status END,
      moved_version = greatest(v.moved_version, excluded.moved_version),
      last_position = CASE WHEN excluded.last_version > coalesce(v.last_version, -1)
                           THEN excluded.last_position ELSE v.last_position END,
      last_version = greatest(v.last_version, excluded.last_version),
      updated_at = now()
    WHERE excluded.name_version > coalesce(v.name_version, -1)
       OR excluded.moved_version > coalesce(v.moved_version, -1)`;
}
