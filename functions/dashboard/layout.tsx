// The page shell: header with navigation, the live-refresh switch, and a notice line.
import { createContext, useContext, type Child } from "hono/jsx";

/**
 * Whether the session may act (the operate scope): without it the pages show no action
 * buttons (the server refuses the actions anyway). Set per page by routes.tsx's render; null
 * (not set) shows no button either.
 */
export const CanOperate = createContext<boolean | null>(null);

export type Section = "overview" | "dead-letters" | "timeline" | "streams";

const links: [Section, string, string][] = [
  ["overview", "/", "Overview"],
  ["dead-letters", "/ui/dead-letters", "Dead letters"],
  ["timeline", "/ui/timeline", "Timeline"],
  ["streams", "/ui/streams", "Streams"],
];

export function Page(props: { title: string; section?: Section; notice?: string; children: Child; live?: boolean }) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${props.title} · corq`}</title>
        <link rel="stylesheet" href="/assets/corq.css" />
        <script src="/assets/corq.js" defer></script>
      </head>
      <body>
        {props.section && (
          <header>
            <a class="brand" href="/">
              corq
            </a>
            <nav aria-label="Dashboard sections">
              {links.map(([section, href, label]) => (
                <a href={href} aria-current={section === props.section ? "page" : undefined}>
                  {label}
                </a>
              ))}
            </nav>
            {props.live !== false && (
              <label>
                <input id="live-toggle" type="checkbox" checked aria-label="Refresh live" /> live{" "}
                <span id="refreshed" class="muted" aria-live="off"></span>
              </label>
            )}
            {useContext(CanOperate) === false && (
              <span class="badge" title="Logged in with a token without the operate scope">
                read-only
              </span>
            )}
            <form method="post" action="/logout">
              <button type="submit" aria-label="Log out">
                Log out
              </button>
            </form>
          </header>
        )}
        <main>
          {props.notice && (
            <p class="notice" role="status">
              {props.notice}
            </p>
          )}
          {props.children}
        </main>
      </body>
    </html>
  );
}

/**
 * A button that POSTs one dashboard action and comes back to this page. The key is `deadKey`,
 * never `key`: JSX keeps `key` (and `ref`) for itself and never hands it to the component, so
 * a per-key button would silently act on every dead key of the subscription.
 */
export function ActionButton(props: {
  action: "retry" | "skip" | "pause" | "resume";
  subscription: string;
  /** One dead key; without it the action covers every dead key of the subscription. */
  deadKey?: string;
  back: string;
  label: string;
  confirm?: string;
  primary?: boolean;
}) {
  if (useContext(CanOperate) !== true) return null;
  return (
    <form class="inline" method="post" action={`/ui/actions/${props.action}`}>
      <input type="hidden" name="subscription" value={props.subscription} />
      {props.deadKey !== undefined && <input type="hidden" name="key" value={props.deadKey} />}
      <input type="hidden" name="back" value={props.back} />
      <button
        type="submit"
        class={props.primary ? "primary" : props.action === "skip" ? "danger" : undefined}
        aria-label={props.label}
        data-confirm={props.confirm}
      >
        {props.action[0].toUpperCase() + props.action.slice(1)}
      </button>
    </form>
  );
}

export function Badge(props: { kind: string; children: Child }) {
  return <span class={`badge ${props.kind}`}>{props.children}</span>;
}

/** 1234 → "1,234"; null → "–". */
export const num = (value: number | null | undefined) => (value == null ? "–" : value.toLocaleString("en-US"));

/** A duration in ms as "850 ms", "12 s", "3 min", "2 h". */
export function age(ms: number | null): string {
  if (ms === null) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${Math.round(ms / 1000)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${Math.round(ms / 3_600_000)} h`;
}

/** JSON cut to `max` characters for a table cell. */
export function preview(value: unknown, max = 160): string {
  const text = JSON.stringify(value) ?? "";
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
