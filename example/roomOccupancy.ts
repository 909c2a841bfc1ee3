// room-occupancy — a process manager, keyed by the room (data.roomId): every visitor's
// arrivals and departures of one room, in order; rooms in parallel. It keeps each room's
// occupants and announces, once each time, that a room became full.
//
// Right by construction, whatever order or how often events come:
// - State is two tables (example/schema.ts): the room's row (occupants, times full, a
//   revision) and one row per (room, visitor) with the visitor's stream version that last
//   moved it. An event is applied only if its version is above that row's: a redelivered or
//   late event is recognised by its identity (stream, version) and changes nothing. Versions
//   ascend within a stream, so "version ≤ the last one applied" is exactly "seen, or older".
//   A Departed before its Arrived records the departure; the late Arrived is then older and
//   ignored — the visitor has left. Occupants count visitors inside, never clamped: it cannot
//   go below 0, and the table's CHECK would say so if it did.
// - Cost per batch, whatever the room's history: one statement reads the room's row and the
//   rows of the batch's visitors, one writes them (plus one append per RoomFull).
// - The write is a compare-and-set on the room's revision: two consumers that ran the same
//   room at once (a lease that expired under a slow handler) cannot both apply; the loser
//   fails its batch and the room's events come again, to be recognised as applied.
// - RoomFull is the process manager's output: the n-th time a room fills up goes to the
//   stream `room-full-<n>-<room>` with expectedVersion -1, appended before the state is
//   written. A crash in between repeats the same decision from the same state and finds it
//   there. Room ids are any text (spaces, accents, 512 bytes): `derivedStream` makes a valid
//   name of each.
import { sql } from "drizzle-orm";
import { defineSubscription, type DeliveredEvent, type EventInput, type HandlerContext } from "../src/index.js";
import type { VisitorEvents } from "./events.js";
import { alreadyThere } from "./greeter.js";
import { derivedStream, VISITOR_STREAMS } from "./streamNames.js";

export const ROOM_CAPACITY = 3;

interface VisitorState {
  version: number;
  inside: boolean;
}

interface RoomState {
  occupants: number;
  timesFull: number;
  /** 0: the room has no row yet */
  revision: number;
}

/** What the room's handler gets: arrivals and departures, each with its seq. */
type Move = DeliveredEvent<VisitorEvents, "Arrived" | "Departed">;

export const roomOccupancy = defineSubscription<VisitorEvents>()({
  name: "room-occupancy",
  events: ["Arrived", "Departed"],
  streams: VISITOR_STREAMS, // only visitors move through rooms: another stream's Arrived fills no room
  key: "data.roomId",
  async handle(events, ctx) {
    const room = ctx.key; // data.roomId as text: the same for every event of the batch
    const { state, visitors } = await readRoom(ctx, room, events);
    const changed = new Map<string, VisitorState>();
    const full: Move[] = [];
    let { occupants, timesFull } = state;
    for (const event of events) {
      const before = visitors.get(event.stream) ?? { version: -1, inside: false };
      if (event.version <= before.version) continue; // applied already, or older than what was
      const inside = event.name === "Arrived";
      if (inside !== before.inside) {
        occupants += inside ? 1 : -1;
        if (inside && occupants === ROOM_CAPACITY) full.push(event);
      }
      const after = { version: event.version, inside };
      visitors.set(event.stream, after);
      changed.set(event.stream, after);
    }
    if (changed.size === 0) return;
    for (const event of full) {
      timesFull += 1;
      const roomFull: EventInput<VisitorEvents, "RoomFull"> = {
        name: "RoomFull",
        data: { roomId: room, capacity: ROOM_CAPACITY, time: timesFull },
        meta: { causation: { stream: event.stream, version: event.version } },
      };
      await ctx.corq
        .append(await roomFullStream(room, timesFull), [roomFull], { expectedVersion: -1 })
        .catch(alreadyThere);
    }
    const [written] = await ctx.run<{ revision: number | null }>(
      writeRoom(room, { occupants, timesFull, revision: state.revision }, changed),
    );
    if (written?.revision == null) {
      throw new Error(`room ${JSON.stringify(room)} changed while this batch ran (another consumer had it); retried`);
    }
  },
});

/** The stream of the n-th RoomFull of a room. */
export const roomFullStream = (room: string, time: number) => derivedStream(`room-full-${time}`, room);

/** One statement: the room's row and the rows of the batch's visitors (not the room's history). */
async function readRoom(
  ctx: HandlerContext<VisitorEvents>,
  room: string,
  events: Move[],
): Promise<{ state: RoomState; visitors: Map<string, VisitorState> }> {
  const streams = JSON.stringify([...new Set(events.map((e) => e.stream))]);
  const [row] = await ctx.run<{ room: unknown; visitors: unknown }>(sql`
    SELECT
      (SELECT json_build_object('occupants', occupants, 'timesFull', times_full, 'revision', revision)
         FROM example.rooms WHERE room = ${room}) AS room,
      (SELECT coalesce(json_agg(json_build_object('visitor', visitor, 'version', version, 'inside', inside)), '[]')
         FROM example.room_visitors
        WHERE room = ${room} AND visitor IN (SELECT jsonb_array_elements_text(${streams}::jsonb))) AS visitors`);
  if (row === undefined) throw new Error("example: the room query returns one row");
  const state = (json(row.room) as RoomState | null) ?? { occupants: 0, timesFull: 0, revision: 0 };
  const rows = json(row.visitors) as ({ visitor: string } & VisitorState)[];
  return { state, visitors: new Map(rows.map((v) => [v.visitor, { version: v.version, inside: v.inside }])) };
}

/**
 * One statement: the room's row, only if its revision is still the one read (else nothing is
 * written and `revision` is null), and then the visitors' rows.
 */
function writeRoom(room: string, next: RoomState, visitors: Map<string, VisitorState>) {
  const rows = JSON.stringify([...visitors].map(([visitor, v]) => ({ visitor, ...v })));
  return sql`
    WITH written AS (
      INSERT INTO example.rooms AS r (room, occupants, times_full, revision)
      VALUES (${room}, ${next.occupants}, ${next.timesFull}, 1)
      ON CONFLICT (room) DO UPDATE
        SET occupants = excluded.occupants, times_full = excluded.times_full,
            revision = r.revision + 1, updated_at = now()
        WHERE r.revision = ${next.revision}
      RETURNING revision
    ), moved AS (
      INSERT INTO example.room_visitors AS v (room, visitor, version, inside)
      SELECT ${room}, m.visitor, m.version, m.inside
        FROM jsonb_to_recordset(${rows}::jsonb) AS m(visitor text, version integer, inside boolean)
       WHERE EXISTS (SELECT FROM written)
      ON CONFLICT (room, visitor) DO UPDATE SET version = excluded.version, inside = excluded.inside
        WHERE v.version < excluded.version
      RETURNING 1
    )
    SELECT (SELECT revision FROM written) AS revision, (SELECT count(*) FROM moved)::int AS moved`;
}

/** json columns: parsed by node-postgres and the Neon driver alike; text as a fallback. */
const json = (value: unknown) => (typeof value === "string" ? JSON.parse(value) : value);
