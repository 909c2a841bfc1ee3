// The example app (the domain corq's design started from): visitors register, arrive in
// rooms and depart. Three subscriptions show the three shapes corq serves:
//   greeter            a policy, keyed by stream: one visitor's events in order
//   room-occupancy     a process manager, keyed by the room (data.roomId): every visitor's
//                      arrivals and departures of one room in order, rooms in parallel
//   visitor-directory  a projection into a table, keyed by stream
// Handlers are at-least-once, so each one is idempotent (noted inline).
import { sql } from "drizzle-orm";
import { CorqError, type StoredEvent, type SubscriptionDefinition } from "../src/index.js";

export const ROOM_CAPACITY = 3;

/** The projection's table (created by `npm run db:migrate` and `npm start`). */
export const exampleSchema = [
  sql`CREATE SCHEMA IF NOT EXISTS example`,
  sql`CREATE TABLE IF NOT EXISTS example.visitors (
    stream text PRIMARY KEY, name text, room text, status text NOT NULL,
    last_position bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`,
];

type VisitorData = { name?: string; roomId?: string };

export const visitorSubscriptions: SubscriptionDefinition[] = [
  {
    name: "greeter",
    events: ["Registered"],
    key: "stream",
    async handle(events, { corq }) {
      for (const event of events) {
        // expectedVersion -1: a redelivery finds the welcome already there and moves on.
        await corq
          .append(
            `welcome-${event.stream}`,
            [{ name: "Welcomed", data: { visitor: event.stream }, meta: { causation: event.position } }],
            {
              expectedVersion: -1,
            },
          )
          .catch(ignoreConflict);
      }
    },
  },
  {
    name: "room-occupancy",
    events: ["Arrived", "Departed"],
    key: "data.roomId",
    async handle(events, { corq, key }) {
      // State lives in the room's own stream; appending with the version just read makes a
      // redelivered batch (crash before the ack) fail the version check instead of counting twice.
      const roomStream = `room-${key}`;
      const history = await corq.readStream(roomStream, { limit: 10_000 });
      const last = history.at(-1);
      let occupants = (last?.data as { occupants?: number } | undefined)?.occupants ?? 0;
      const handled = new Set(history.map((e) => (e.meta as { causation?: number }).causation));
      const changes = [];
      for (const event of events.filter((e) => !handled.has(e.position))) {
        occupants = Math.max(0, occupants + (event.name === "Arrived" ? 1 : -1));
        const meta = { causation: event.position };
        changes.push({ name: "OccupancyChanged", data: { roomId: key, occupants }, meta });
        if (event.name === "Arrived" && occupants === ROOM_CAPACITY) {
          changes.push({ name: "RoomFull", data: { roomId: key, capacity: ROOM_CAPACITY }, meta });
        }
      }
      if (changes.length === 0) return;
      await corq.append(roomStream, changes, { expectedVersion: last ? last.version : -1 });
      console.log(`room ${key}: ${occupants} occupant(s)`);
    },
  },
  {
    name: "visitor-directory",
    events: ["Registered", "Arrived", "Departed"],
    key: "stream",
    async handle(events, { run }) {
      for (const event of events) await run(projectVisitor(event));
    },
  },
];

/** Upsert guarded by the position: replaying an older event never overwrites a newer state. */
function projectVisitor(event: StoredEvent) {
  const data = event.data as VisitorData;
  const status = event.name === "Registered" ? "registered" : event.name === "Arrived" ? "in-room" : "left";
  const room = event.name === "Arrived" ? (data.roomId ?? null) : null;
  return sql`
    INSERT INTO example.visitors AS v (stream, name, room, status, last_position)
    VALUES (${event.stream}, ${data.name ?? null}, ${room}, ${status}, ${event.position})
    ON CONFLICT (stream) DO UPDATE SET
      name = coalesce(excluded.name, v.name), room = excluded.room, status = excluded.status,
      last_position = excluded.last_position, updated_at = now()
    WHERE v.last_position < excluded.last_position`;
}

function ignoreConflict(error: unknown) {
  if (!(error instanceof CorqError && error.code === "version_conflict")) throw error;
}
