-- The stats' oldest pending event (min(position) of a subscription's queued rows): one index
-- probe. Without it every queued row of the subscription is read per stats call (200,000 rows
-- after a rewind of 200,000 events; the whole queue at 1M keys with one event each);
-- queue_position_idx (position) leads with the position, so a subscription with nothing queued
-- beside one with a backlog would walk all of that backlog. Partial on a predicate every row
-- meets (positions start at 1) that only the stats query states, so no other statement can pick
-- it: as a full index it was taken for the ack's delete in a plan made on an empty queue (see
-- src/db/schema.ts). A plain CREATE INDEX: the queue holds only unacked rows, so the build is short.
CREATE INDEX "queue_subscription_position_idx" ON "corq"."queue" USING btree ("subscription_id","position") WHERE position > 0;
