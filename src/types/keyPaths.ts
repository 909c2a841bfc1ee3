// Key paths checked against an event map: "data.<field>…" must name a field (at any depth up to
// 4, then anything below) of the data of at least one subscribed event; "meta.<anything>" and
// "stream" always fit. Without a map a key is any string, checked when parsed (config.ts).
import type { AnyEvents, EventMap, EventName } from "./events.js";

/** A subscription's `key`: "stream", "meta.…", or a path into the subscribed events' data. */
export type KeyPath<E extends EventMap = AnyEvents, N extends EventName<E> = EventName<E>> = string extends N
  ? string
  : "stream" | `meta.${string}` | (N extends unknown ? `data.${DataPath<E[N]>}` : never);

/** The paths into a value of type T: its fields, their fields …; `string` past 4 levels or where T is not known. */
export type DataPath<T, Depth extends unknown[] = []> = Depth["length"] extends 4
  ? string
  : unknown extends T
    ? string
    : T extends readonly (infer Element)[]
      ? `${number}` | `${number}.${DataPath<Element, [...Depth, unknown]>}`
      : T extends object
        ? {
            [K in keyof T & (string | number)]-?: `${K}` | `${K}.${DataPath<NonNullable<T[K]>, [...Depth, unknown]>}`;
          }[keyof T & (string | number)]
        : never;
