// The example's events, name → data, as its producers write them: the event map that types its
// subscriptions (defineSubscription<VisitorEvents>) and their appends (docs/typed-events.md).
// The handlers still read data defensively: the log is open to any producer with an append
// token, so an event's data is what was sent, not what this type says — a subscription's
// `schemas` would have corq check it before the handler runs; the example's handlers cope
// instead (a Registered without a name, an Arrived without a room).
export type VisitorEvents = {
  Registered: { name: string };
  Arrived: { roomId: string };
  Departed: { roomId: string };
  Welcomed: { visitor: string; name: string | null };
  RoomFull: { roomId: string; capacity: number; time: number };
};
