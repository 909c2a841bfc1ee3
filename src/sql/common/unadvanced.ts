import { sql, type SQL } from "drizzle-orm";
import { events } from "../../db/schema.js";

/**
 * How many events of the log subscription row `s` has not advanced past (those after its
 * watermark in log order, (tx, position)), counted up to `cap` rows: a walk of events
 * (tx, position) that stops there, so a subscription replaying a long log costs `cap` index
 * entries, not its whole lag. A count under the cap is exact; one at it says "at least".
 */
export const unadvancedUpTo = (cap: number): SQL =>
  sql`(SELECT count(*) FROM (SELECT FROM ${events} e
        WHERE (e.tx, e.position) > (s.watermark_tx, s.watermark_position)
        ORDER BY e.tx, e.position LIMIT ${cap}) x)`;
