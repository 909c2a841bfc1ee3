// defineSubscription: a subscription declared in a file of its own, typed by the app's event map
// (docs/typed-events.md). Curried so that TypeScript infers the subscribed names from `events`
// while the map is given explicitly: TypeScript infers all of a call's type arguments or none.
import type { AnyEvents, EventMap, EventName, SubscriptionDefinition } from "./types.js";

/**
 * `defineSubscription<Events>()({ name, events: ["OrderPlaced"], handle(events) { … } })`: the
 * handler gets DeliveredEvent<Events, "OrderPlaced">. Or with the names given:
 * `defineSubscription<Events, "OrderPlaced">({ … })`. Returns the definition unchanged.
 */
export function defineSubscription<E extends EventMap = AnyEvents>(): <N extends EventName<E> = EventName<E>>(
  definition: SubscriptionDefinition<E, N>,
) => SubscriptionDefinition<E, N>;
export function defineSubscription<E extends EventMap = AnyEvents, N extends EventName<E> = EventName<E>>(
  definition: SubscriptionDefinition<E, N>,
): SubscriptionDefinition<E, N>;
export function defineSubscription(definition?: SubscriptionDefinition) {
  return definition ?? ((given: SubscriptionDefinition) => given);
}
