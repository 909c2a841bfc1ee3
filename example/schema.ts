// The example app's own tables, in its own Postgres schema `example` — never corq's migrations:
// `npm run db:migrate` on a user's database must not create them. They are this repository's
// Worker's app migration (functions/app.ts, named by a hash of these statements, so any change
// runs them all again): the Worker applies it itself, and so do `npm start` (and the Worker
// tests) and `npm run db:migrate -- --example`.
// Every statement is idempotent and also brings the first version of the example (which kept
// room state in `room-*` streams and one position per visitor row) up to this one.
//
// State lives here, not in streams: nobody can append to a table, whatever
// CORQ_PUBLIC_APPEND says, and a room's state is one row however long its history.
import { sql } from "drizzle-orm";

export const exampleSchema = [
  sql`CREATE SCHEMA IF NOT EXISTS example`,

  // visitor-directory: one row per visitor. Each field group carries the stream version it
  // was written from, so an older event (a redelivery, or one that arrives late) never
  // overwrites a newer field, and a field it does not touch is never lost.
  sql`CREATE TABLE IF NOT EXISTS example.visitors (
    stream text PRIMARY KEY, name text, room text, status text NOT NULL,
    last_position bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`,
  sql`ALTER TABLE example.visitors
    ADD COLUMN IF NOT EXISTS name_version integer,
    ADD COLUMN IF NOT EXISTS moved_version integer,
    ADD COLUMN IF NOT EXISTS last_version integer`,
  // rows of the first version: every field was as of the event at last_position
  sql`UPDATE example.visitors v
    SET name_version = e.version, moved_version = e.version, last_version = e.version
    FROM corq.events e WHERE e.position = v.last_position AND v.last_version IS NULL`,

  // room-occupancy: a room's state in one row; `revision` makes its write a compare-and-set
  sql`CREATE TABLE IF NOT EXISTS example.rooms (
    room text PRIMARY KEY,
    occupants integer NOT NULL CHECK (occupants >= 0),
    times_full integer NOT NULL DEFAULT 0,
    revision integer NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now())`,
  // …and who is in it: one row per (room, visitor) with the visitor's stream version that
  // last moved it, so a duplicate or late Arrived / Departed changes nothing
  sql`CREATE TABLE IF NOT EXISTS example.room_visitors (
    room text NOT NULL, visitor text NOT NULL, version integer NOT NULL, inside boolean NOT NULL,
    PRIMARY KEY (room, visitor))`,
];
