// `corq alerts put|list|delete` (docs/cli.md): alerts over the HTTP API, admin only.
import type { AlertCondition, AlertInput } from "../src/types.js";
import { integer, noMore, positional, UsageError, type Context } from "./arguments.js";
import { formatTable, formatTime } from "./table.js";

export async function alertsCommand(ctx: Context) {
  const action = positional(ctx, { index: 0, name: "put|list|delete" });
  const putOnly = ["on", "lag-over", "held-over", "min-interval", "secret"] as const;
  if (action !== "put") {
    const given = putOnly.find((option) => ctx.values[option] !== undefined);
    if (given) throw new UsageError(`alerts ${action} takes no --${given}`);
  }
  if (action === "list") {
    noMore(ctx, 1);
    const list = await ctx.client.alerts();
    ctx.print(list, () =>
      formatTable(
        ["name", "on", "url", "sent", "failed", "last send"],
        list.alerts.map((a) => [
          a.name,
          a.on
            .map((c) =>
              c === "subscription.lag" ? `${c} > ${a.lagOver}` : c === "horizon.held" ? `${c} > ${a.heldOverMs} ms` : c,
            )
            .join(", "),
          a.url,
          a.sent,
          a.failed,
          a.lastSend === null
            ? ""
            : `${a.lastSend.type}${a.lastSend.subscription ? ` ${a.lastSend.subscription}` : ""}${a.lastSend.key ? `/${a.lastSend.key}` : ""} ` +
              (a.lastSend.sentAt
                ? `sent ${formatTime(a.lastSend.sentAt)}`
                : `${a.lastSend.retrying ? "retrying" : "failed"}: ${a.lastSend.error ?? ""}`),
        ]),
      ),
    );
  } else if (action === "put") {
    const name = positional(ctx, { index: 1, name: "name" });
    const url = positional(ctx, { index: 2, name: "receiver url" });
    noMore(ctx, 3);
    if (!ctx.values.on)
      throw new UsageError(
        "--on is required: key.dead, subscription.lag, advance.failed, horizon.held (comma-separated)",
      );
    const input: AlertInput = {
      url,
      on: ctx.values.on.split(",").map((c) => c.trim()) as AlertCondition[],
      lagOver: integer(ctx.values["lag-over"], { name: "lag-over", min: 1 }),
      heldOverMs: integer(ctx.values["held-over"], { name: "held-over", min: 1 }),
      minIntervalMs: integer(ctx.values["min-interval"], { name: "min-interval", min: 1 }),
      secret: ctx.values.secret,
    };
    const put = await ctx.client.putAlert(name, input);
    ctx.print(put, () =>
      put.secret === undefined
        ? `alert ${put.name} replaced (its signing secret is the one it had, unless --secret gave one)`
        : `alert ${put.name} created; signing secret: ${put.secret}\nshown only now`,
    );
  } else if (action === "delete") {
    const name = positional(ctx, { index: 1, name: "name" });
    noMore(ctx, 2);
    await ctx.client.deleteAlert(name);
    ctx.print({ deleted: name }, () => `deleted alert ${name}`);
  } else {
    throw new UsageError(`unknown alerts action: ${action} (put, list, delete)`);
  }
}
