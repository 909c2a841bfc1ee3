// The example app (the domain corq's design started from): visitors register, arrive in
// rooms and depart. Three subscriptions show the three shapes corq serves:
//   greeter            a policy, keyed by stream: one visitor's events in order (greeter.ts)
//   room-occupancy     a process manager, keyed by the room (data.roomId): every visitor's
//                      arrivals and departures of one room in order, rooms in parallel
//                      (roomOccupancy.ts)
//   visitor-directory  a projection into a table, keyed by stream (visitorDirectory.ts)
//
// Delivery is at least once, and a handler may see an event again (a crash before the ack, a
// lease that expired under a slow handler). Each handler here is idempotent by the event's
// identity, (stream, version): within a stream versions ascend in log order, so "this
// stream's version ≤ the last one applied" means seen, or older. (Positions are unique too,
// but within one key they need not ascend: log order is by transaction.) State lives in the
// example's own tables (schema.ts), never in streams anyone could append to.
import type { SubscriptionDefinition } from "../src/index.js";
import type { VisitorEvents } from "./events.js";
import { greeter } from "./greeter.js";
import { roomOccupancy } from "./roomOccupancy.js";
import { visitorDirectory } from "./visitorDirectory.js";

export type { VisitorEvents } from "./events.js";
export { exampleSchema } from "./schema.js";
export { ROOM_CAPACITY } from "./roomOccupancy.js";

export const visitorSubscriptions: SubscriptionDefinition<VisitorEvents>[] = [greeter, roomOccupancy, visitorDirectory];
