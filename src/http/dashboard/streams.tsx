// GET /ui/streams — the log tail; GET /ui/streams/:stream — one stream's events.
import type { StoredEvent } from "../../index.js";
import { JsonText, Page, When, num, useHref } from "./layout.js";

function Events(props: { events: StoredEvent[]; label: string; showStream: boolean }) {
  const href = useHref();
  return (
    <div class="scroll">
      <table class="cards" aria-label={props.label}>
        <thead>
          <tr>
            <th class="num">Position</th>
            {props.showStream && <th>Stream</th>}
            <th class="num">Version</th>
            <th>Name</th>
            <th>Data</th>
            <th>Appended</th>
          </tr>
        </thead>
        <tbody>
          {props.events.map((e) => (
            <tr>
              <td class="num" data-label="Position">
                {num(e.position)}
              </td>
              {props.showStream && (
                <td data-label="Stream">
                  <a href={href(`/ui/streams/${encodeURIComponent(e.stream)}`)}>{e.stream}</a>
                </td>
              )}
              <td class="num" data-label="Version">
                {num(e.version)}
              </td>
              <td data-label="Name">{e.name}</td>
              <td class="wrap" data-label="Data">
                <JsonText value={e.data} max={240} />
              </td>
              <td data-label="Appended">
                <When at={e.createdAt} ms />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function StreamForm(props: { value?: string }) {
  return (
    <form class="toolbar" method="get" action={useHref()("/ui/streams")}>
      <label for="stream">Stream</label>
      <input
        id="stream"
        name="stream"
        value={props.value ?? ""}
        required
        maxlength={200}
        placeholder="e.g. visitor-42"
      />
      <button type="submit">Open</button>
    </form>
  );
}

export function LogTail(props: { events: StoredEvent[]; before?: number; next: number | null; notice?: string }) {
  const href = useHref();
  return (
    <Page title="Streams" section="streams" notice={props.notice}>
      <h1>Streams</h1>
      <StreamForm />
      <h2>Log tail (newest first)</h2>
      <div id="live">
        <Events events={props.events} label="Log tail" showStream />
        {props.events.length === 0 && (
          <p class="muted">{props.before === undefined ? "The log is empty." : "No older events."}</p>
        )}
      </div>
      <p class="toolbar">
        {props.before !== undefined && <a href={href("/ui/streams")}>Newest</a>}
        {props.next !== null && (
          <a href={href(`/ui/streams?before=${props.next}`)} rel="next">
            Older events
          </a>
        )}
      </p>
    </Page>
  );
}

export function Stream(props: { stream: string; events: StoredEvent[]; from: number; limit: number }) {
  const base = useHref()(`/ui/streams/${encodeURIComponent(props.stream)}`);
  const last = props.events.at(-1);
  return (
    <Page title={props.stream} section="streams">
      <h1>Stream {props.stream}</h1>
      <StreamForm value={props.stream} />
      <div id="live">
        <Events events={props.events} label={`Events of ${props.stream}`} showStream={false} />
        {props.events.length === 0 && (
          <p class="muted">No events{props.from > 0 ? ` from version ${props.from}` : ""}.</p>
        )}
      </div>
      <p class="toolbar">
        {props.from > 0 && <a href={base}>First page</a>}
        {last && props.events.length === props.limit && (
          <a href={`${base}?from=${last.version + 1}`} rel="next">
            Next page
          </a>
        )}
      </p>
    </Page>
  );
}
