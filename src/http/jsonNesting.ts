// How deeply a JSON text nests, found by one pass over its characters before JSON.parse builds
// anything: a 1 MB body of `[[[[…` took 1.8 s of Node's one thread to parse (and then to walk)
// before the depth rule (src/config.ts, MAX_JSON_DEPTH) refused it; this pass takes a few ms.
import { MAX_JSON_DEPTH } from "../config.js";

// a request body wraps event data in a few levels of its own ({"events":[{"data": …}]})
export const MAX_BODY_NESTING = MAX_JSON_DEPTH + 8;

const OPEN_OBJECT = 0x7b; // {
const OPEN_ARRAY = 0x5b; // [
const CLOSE_OBJECT = 0x7d; // }
const CLOSE_ARRAY = 0x5d; // ]
const QUOTE = 0x22; // "
const BACKSLASH = 0x5c; // \

/** Whether `text` (JSON or not) opens more than `limit` objects and arrays inside one another. */
export function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const char = text.charCodeAt(i);
    if (inString) {
      if (char === BACKSLASH) i++;
      else if (char === QUOTE) inString = false;
    } else if (char === QUOTE) inString = true;
    else if (char === OPEN_OBJECT || char === OPEN_ARRAY) {
      if (++depth > limit) return true;
    } else if (char === CLOSE_OBJECT || char === CLOSE_ARRAY) depth--;
  }
  return false;
}
