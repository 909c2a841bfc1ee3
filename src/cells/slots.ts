// Where a stream's events live in a deployment of several cells: its tenant (a function of the
// stream name), the tenant's slot (a fixed hash), and the slot's cell (the directory).

/** Slots a directory is made with: a tenant is moved with the other tenants of its slot. */
export const DEFAULT_SLOTS = 1024;

/**
 * The default tenant of a stream: the text before its first ":" ("acme:order-1" → "acme"); a
 * stream without one has the tenant "" (its slot starts in the first cell).
 */
export function tenantBeforeColon(stream: string): string {
  const colon = stream.indexOf(":");
  return colon < 0 ? "" : stream.slice(0, colon);
}

const encoder = new TextEncoder();

/**
 * The slot of a tenant: 32-bit FNV-1a of its UTF-8 bytes, modulo `slots`. Fixed for good (a
 * change would send every tenant to another slot): docs/architecture.md, "Cells".
 */
export function slotOf(tenant: string, slots: number): number {
  let hash = 0x811c9dc5;
  for (const byte of encoder.encode(tenant)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % slots;
}
