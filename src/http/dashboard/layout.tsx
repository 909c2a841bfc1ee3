// The page shell: header with navigation, the live-refresh switch, and a notice line.
import { createContext, useContext, type Child } from "hono/jsx";
import { underBase } from "../basePath.js";

/**
 * Whether the session may act (the operate scope): without it the pages show no action
 * buttons (the server refuses the actions anyway). Set per page by routes.tsx's render; null
 * (not set) shows no button either.
 */
export const CanOperate = createContext<boolean | null>(null);

/**
 * The prefix the dashboard is served under (src/http/basePath.ts; "" at the root): every link,
 * asset and form action goes under it. Set per page by routes.tsx (`mounted`).
 */
export const BasePath = createContext("");

/** Call while rendering: makes a dashboard path ("/ui/streams", "/") the URL the browser must request. */
export function useHref(): (path: string) => string {
  const basePath = useContext(BasePath);
  return (path) => underBase(basePath, path);
}

export type Section = "overview" | "dead-letters" | "timeline" | "streams" | "alerts";

const links: [Section, string, string][] = [
  ["overview", "/", "Overview"],
  ["dead-letters", "/ui/dead-letters", "Dead letters"],
  ["timeline", "/ui/timeline", "Timeline"],
  ["streams", "/ui/streams", "Streams"],
  ["alerts", "/ui/alerts", "Alerts"],
];

export function Page(props: { title: string; section?: Section; notice?: string; children: Child; live?: boolean }) {
  const href = useHref();
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${props.title} · corq`}</title>
        <link rel="stylesheet" href={href("/assets/corq.css")} />
        <script src={href("/assets/corq.js")} defer></script>
      </head>
      <body>
        {props.section && (
          <header>
            <a class="brand" href={href("/")}>
              corq
            </a>
            <nav aria-label="Dashboard sections">
              {links.map(([section, path, label]) => (
                <a href={href(path)} aria-current={section === props.section ? "page" : undefined}>
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
            <form method="post" action={href("/logout")}>
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
 * Rewinds a subscription, or one key of it (`rewindKey`), to a position typed in or
 * "beginning", after a confirmation: its events from there are delivered again.
 */
export function RewindForm(props: {
  subscription: string;
  rewindKey?: string;
  back: string;
  label: string;
  /** Text before the form (shown only with the form). */
  caption?: string;
}) {
  if (useContext(CanOperate) !== true) return null;
  const href = useHref();
  const what = props.rewindKey === undefined ? `every key of ${props.subscription}` : `key ${props.rewindKey}`;
  return (
    <form class="inline" method="post" action={href("/ui/actions/rewind")}>
      {props.caption && <span>{props.caption} </span>}
      <input type="hidden" name="subscription" value={props.subscription} />
      {props.rewindKey !== undefined && <input type="hidden" name="key" value={props.rewindKey} />}
      <input type="hidden" name="back" value={props.back} />
      <input
        name="to"
        size={props.rewindKey === undefined ? 9 : 7}
        required
        placeholder="position"
        pattern="[0-9]{1,16}|beginning"
        title="a position of the log, or beginning"
        aria-label={`Rewind position for ${props.label}`}
      />
      <button
        type="submit"
        aria-label={`Rewind ${props.label}`}
        data-confirm={`Rewind ${what}? Its events from that position on are delivered again (marked replay).`}
      >
        Rewind
      </button>
    </form>
  );
}

/**
 * A button that POSTs one dashboard action and comes back to this page. The key is `deadKey`,
 * never `key`: JSX keeps `key` (and `ref`) for itself and never hands it to the component, so
 * a per-key button would silently act on every dead key of the subscription.
 */
export function ActionButton(props: {
  action: "retry" | "skip" | "pause" | "resume" | "pause-key" | "resume-key";
  subscription: string;
  /** One key (retry, skip: a dead one; without it they cover every dead key of the subscription). */
  deadKey?: string;
  back: string;
  label: string;
  /** The button's text (default: the action's name). */
  text?: string;
  confirm?: string;
  primary?: boolean;
}) {
  if (useContext(CanOperate) !== true) return null;
  const href = useHref();
  return (
    <form class="inline" method="post" action={href(`/ui/actions/${props.action}`)}>
      <input type="hidden" name="subscription" value={props.subscription} />
      {props.deadKey !== undefined && <input type="hidden" name="key" value={props.deadKey} />}
      <input type="hidden" name="back" value={props.back} />
      <button
        type="submit"
        class={props.primary ? "primary" : props.action === "skip" ? "danger" : undefined}
        aria-label={props.label}
        data-confirm={props.confirm}
      >
        {props.text ?? props.action.charAt(0).toUpperCase() + props.action.slice(1)}
      </button>
    </form>
  );
}

/** Retry and Skip for one dead key (the keys page and the dead letters page). */
export function DeadKeyActions(props: { subscription: string; deadKey: string; back: string }) {
  const { subscription, deadKey, back } = props;
  return (
    <>
      <ActionButton
        action="retry"
        subscription={subscription}
        deadKey={deadKey}
        back={back}
        label={`Retry ${deadKey}`}
        primary
      />
      <ActionButton
        action="skip"
        subscription={subscription}
        deadKey={deadKey}
        back={back}
        label={`Skip the failed event of ${deadKey}`}
        confirm={`Skip the failed event of ${deadKey}? It will not be delivered.`}
      />
    </>
  );
}

export function Badge(props: { kind: string; children: Child }) {
  return <span class={`badge ${props.kind}`}>{props.children}</span>;
}

/** One figure of a card's row: the value over its label; `title` says on hover what it counts. */
export function Figure(props: { label: Child; title?: string; testid?: string; children: Child }) {
  return (
    <div class="figure" title={props.title}>
      <b data-testid={props.testid}>{props.children}</b>
      <span>{props.label}</span>
    </div>
  );
}

/** 1234 → "1,234"; null → "–". */
export const num = (value: number | null | undefined) => (value == null ? "–" : value.toLocaleString("en-US"));
/** A count that may be an estimate (stats' `lag`, the log's `events` past 10,000): "≈" before it then. */
export const about = (value: number, estimated: boolean) => `${estimated ? "≈ " : ""}${num(value)}`;

/** A duration in ms as "850 ms", "12 s", "3 min", "2 h". */
export function age(ms: number | null): string {
  if (ms === null) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${Math.round(ms / 1000)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${Math.round(ms / 3_600_000)} h`;
}

/**
 * JSON cut to `max` characters for a table cell, with a space after every `,` and `:` between
 * members (compact JSON has no place to wrap at all, so a narrow cell broke it anywhere).
 */
export function preview(value: unknown, max = 160): string {
  return cut(spacedJson(value), max);
}

const cut = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** JSON.stringify on one line with `, ` and `: ` between members (strings untouched). */
export function spacedJson(value: unknown): string {
  return jsonParts(value).join(" ");
}

/**
 * Compact JSON cut at the `,` and `:` between members (each part keeps its punctuation):
 * `{"a":`, `1,`, `"b":`, `[1,`, `2]}`. Strings and their escapes are untouched.
 */
export function jsonParts(value: unknown): string[] {
  const compact = value === undefined ? undefined : JSON.stringify(value);
  if (compact === undefined) return [];
  const parts: string[] = [];
  let part = "";
  let inString = false;
  for (let i = 0; i < compact.length; i++) {
    const ch = compact[i];
    part += ch;
    if (inString) {
      if (ch === "\\") part += compact[++i] ?? "";
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === "," || ch === ":") {
      parts.push(part);
      part = "";
    }
  }
  if (part !== "") parts.push(part);
  return parts;
}

/**
 * JSON in a cell (a `<pre>`): each part of jsonParts an unbreakable unit (`span.nb`) with a
 * space between, so a line wraps between members — after `"order-0001",`, not after its
 * hyphen nor inside a name; a part wider than the cell still wraps inside itself.
 */
export function JsonText(props: { value: unknown; max?: number; prefix?: string }) {
  let budget = (props.max ?? 160) - (props.prefix?.length ?? 0);
  const shown: string[] = [];
  for (const part of jsonParts(props.value)) {
    if (budget <= 0) break;
    shown.push(part.length + 1 > budget ? `${part.slice(0, Math.max(0, budget - 1))}…` : part);
    budget -= part.length + 1;
  }
  return (
    <pre class="json">
      {props.prefix}
      {shown.map((part, i) => (
        <>
          {i > 0 && " "}
          <span class="nb">{part}</span>
        </>
      ))}
    </pre>
  );
}

/**
 * An error text for a cell: JSON in it (a receiver's answer, often after a prefix such as
 * "HTTP 503: ") shown like JsonText; other text as it is.
 */
export function errorText(text: string, max = 600): string {
  const json = jsonIn(text);
  return cut(json ? json.prefix + spacedJson(json.value) : text, max);
}

export function ErrorText(props: { text: string; max?: number }) {
  const json = jsonIn(props.text);
  if (!json) return <pre>{cut(props.text, props.max ?? 600)}</pre>;
  return <JsonText value={json.value} prefix={json.prefix} max={props.max ?? 600} />;
}

/** The JSON document that ends `text` (after a prefix), if it does. */
function jsonIn(text: string): { prefix: string; value: unknown } | undefined {
  const start = text.search(/[[{]/);
  if (start < 0) return undefined;
  try {
    return { prefix: text.slice(0, start), value: JSON.parse(text.slice(start)) };
  } catch {
    return undefined;
  }
}

/** Text with its ISO times (UTC, "…Z") kept whole: a narrow cell wrapped them after a hyphen. */
export function KeepTimes(props: { text: string }) {
  return (
    <>
      {props.text
        .split(/(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)/)
        .map((piece, i) => (i % 2 === 1 ? <span class="nb">{piece}</span> : piece))}
    </>
  );
}

/** An ISO time as the dashboard shows every time: "2026-11-30 12:00:05 UTC" (`ms`: with milliseconds). */
export function utc(iso: string, ms = false): string {
  return `${iso.replace("T", " ").slice(0, ms ? 23 : 19)} UTC`;
}

/** A point in time, in UTC and saying so. */
export function When(props: { at: string; ms?: boolean }) {
  return <time datetime={props.at}>{utc(props.at, props.ms)}</time>;
}

/** A time relative to now ("in 3 s", "5 min"), with its UTC time as the tooltip. */
export function Relative(props: { at: string; children: Child }) {
  return (
    <time datetime={props.at} title={utc(props.at)}>
      {props.children}
    </time>
  );
}
