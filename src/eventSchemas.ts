// Runtime validation of delivered data with Standard Schema validators (zod, valibot, arktype …:
// anything with `~standard.validate`; src/types/standardSchema.ts). It runs where code handlers
// run — consume/handle.ts, the one door of consume, drain and transactional batches, in Node and
// in the Worker — so an event whose data fails its schema fails its batch like a handler that
// throws: retried with backoff, dead after maxAttempts, the validator's messages its lastError.
import { CorqError } from "./errors.js";
import type { DeliveredEvent, EventSchemas, StandardSchemaV1, SubscriptionDefinition } from "./types.js";

/** A subscription's validators by event name (null: none). */
export type Validators = ReadonlyMap<string, StandardSchemaV1>;

/** An event whose data its schema refused: the batch fails with this message. */
export class EventDataInvalid extends Error {
  constructor(event: DeliveredEvent, issues: readonly StandardSchemaV1.Issue[]) {
    const listed = issues.map((issue) => `${issuePath(issue)}: ${issue.message}`).join("; ");
    super(`${event.name} at position ${event.position} (stream ${event.stream}) failed its schema: ${listed}`);
    this.name = "EventDataInvalid";
  }
}

/** "data", "data.items.0.price": where an issue is, from its path (keys or { key } segments). */
function issuePath(issue: StandardSchemaV1.Issue): string {
  const segments = (issue.path ?? []).map((segment) =>
    String(typeof segment === "object" && segment !== null ? segment.key : segment),
  );
  return ["data", ...segments].join(".");
}

/**
 * The batch as the handler gets it: each event that has a schema with the data its schema
 * outputs (sync or async validators); the first event that fails throws EventDataInvalid.
 */
export async function validated(events: DeliveredEvent[], validators: Validators): Promise<DeliveredEvent[]> {
  const out: DeliveredEvent[] = [];
  for (const event of events) {
    const schema = validators.get(event.name);
    if (schema === undefined) {
      out.push(event);
      continue;
    }
    const pending = schema["~standard"].validate(event.data);
    const result = pending instanceof Promise ? await pending : pending;
    if (result.issues) throw new EventDataInvalid(event, result.issues);
    out.push({ ...event, data: result.value as DeliveredEvent["data"] });
  }
  return out;
}

/**
 * A subscription's `schemas`, checked: each value a Standard Schema validator, each name one the
 * subscription takes (a typo would otherwise check nothing). null when it has none.
 */
export function parseValidators(
  schemas: unknown,
  { events, label }: { events: string[]; label: string },
): Validators | null {
  const validators = new Map<string, StandardSchemaV1>();
  for (const [name, schema] of entries(schemas, `${label}.schemas`)) {
    if (!events.includes("*") && !events.includes(name)) {
      throw new CorqError(
        "invalid_config",
        `${label}.schemas.${name}: the subscription does not take "${name}" events (events: ${events.join(", ")})`,
      );
    }
    validators.set(name, schema);
  }
  return validators.size > 0 ? validators : null;
}

/**
 * The shared `schemas` of createCorq / createWorker / startServe given to each subscription, for
 * the names it takes; a subscription's own win. Definitions that take none of them stay as they are.
 */
export function withSharedSchemas(
  definitions: SubscriptionDefinition[],
  shared: EventSchemas | undefined,
): SubscriptionDefinition[] {
  const all = entries(shared, "schemas");
  if (all.length === 0) return definitions;
  return definitions.map((definition) => {
    const events: readonly string[] = Array.isArray(definition.events) ? definition.events : ["*"];
    const taken = all.filter(([name]) => events.includes("*") || events.includes(name));
    if (taken.length === 0) return definition;
    const own = typeof definition.schemas === "object" ? definition.schemas : {};
    // the runtime checks each value (parseValidators); no map types them here
    const schemas = { ...Object.fromEntries(taken), ...own } as EventSchemas;
    return { ...definition, handle: definition.handle, schemas };
  });
}

function entries(schemas: unknown, label: string): [string, StandardSchemaV1][] {
  if (schemas === undefined) return [];
  if (typeof schemas !== "object" || schemas === null || Array.isArray(schemas)) {
    throw new CorqError("invalid_config", `${label} must be an object: event name → Standard Schema validator`);
  }
  const found: [string, StandardSchemaV1][] = [];
  for (const [name, schema] of Object.entries(schemas)) {
    if (schema === undefined) continue;
    if (typeof (schema as Partial<StandardSchemaV1> | null)?.["~standard"]?.validate !== "function") {
      throw new CorqError(
        "invalid_config",
        `${label}.${name} must be a Standard Schema validator (zod, valibot, arktype …: an object with ~standard.validate)`,
      );
    }
    found.push([name, schema as StandardSchemaV1]);
  }
  return found;
}
