import { sql, type SQL } from "drizzle-orm";
import { subscriptions } from "../../db/schema.js";

/** Pauses or resumes consumption (advancing goes on); returns a row when the subscription exists. */
export function setPaused(subscription: string, paused: boolean): SQL {
  return sql`UPDATE ${subscriptions} SET paused = ${paused}, updated_at = now() WHERE name = ${subscription} RETURNING name`;
}
