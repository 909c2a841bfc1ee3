// The dashboard's stylesheet and script, served by the Worker itself (no CDN, no build step).

export const css = `
:root { --fg: #1d2330; --muted: #5f6b7a; --line: #d9dee5; --bg: #f6f7f9; --card: #fff; --accent: #2457c5;
  --ok: #2e8b57; --failed: #d98a00; --dead: #c0392b; --expired: #7d5ba6; --leased: #2457c5; font-size: 15px; }
* { box-sizing: border-box; }
body { margin: 0; font: 1rem/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; flex-wrap: wrap; gap: .5rem 1.5rem; align-items: center; padding: .6rem 1rem; background: #152039; color: #fff; }
header a { color: #dfe7f7; text-decoration: none; }
header a[aria-current="page"] { color: #fff; font-weight: 600; border-bottom: 2px solid #8fb0ff; }
header .brand { font-weight: 700; font-size: 1.1rem; color: #fff; }
header nav { display: flex; flex-wrap: wrap; gap: .9rem; flex: 1; }
header form { margin: 0; }
main { padding: 1rem; max-width: 1200px; margin: 0 auto; }
h1 { font-size: 1.3rem; margin: .2rem 0 1rem; }
h2 { font-size: 1.05rem; margin: 1.4rem 0 .5rem; }
a { color: var(--accent); }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: .8rem 1rem; margin-bottom: 1rem; }
.figures { display: flex; flex-wrap: wrap; gap: 1rem 2rem; }
.figure b { display: block; font-size: 1.4rem; }
.figure span { color: var(--muted); font-size: .85rem; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; background: var(--card); }
th, td { text-align: left; padding: .35rem .55rem; border-bottom: 1px solid var(--line); vertical-align: top; white-space: nowrap; }
th { font-size: .8rem; text-transform: uppercase; letter-spacing: .03em; color: var(--muted); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.wrap { white-space: normal; max-width: 28rem; overflow-wrap: break-word; }
td.why { min-width: 12rem; word-break: normal; overflow-wrap: anywhere; }
td.holder { min-width: 7.5rem; max-width: 11rem; word-break: normal; }
td.actions { white-space: normal; }
div.actions { min-width: 14.5rem; }
div.actions form.inline { display: inline-block; margin-bottom: .2rem; white-space: nowrap; }
code, pre { font: .85rem/1.35 ui-monospace, SFMono-Regular, Menlo, monospace; }
pre { margin: 0; white-space: pre-wrap; overflow-wrap: break-word; max-width: 28rem; }
.nb { display: inline-block; max-width: 100%; overflow-wrap: anywhere; }
.badge { display: inline-block; padding: 0 .45rem; border-radius: 999px; font-size: .8rem; background: #e8ecf2; }
.badge.dead { background: #fbe3e0; color: var(--dead); } .badge.ready { background: #e3f3ea; color: var(--ok); }
.badge.leased { background: #e3ebfb; color: var(--leased); } .badge.backoff { background: #fdf1dc; color: #9a6200; }
.badge.paused { background: #eee4f7; color: var(--expired); }
button, .button { font: inherit; padding: .25rem .7rem; border: 1px solid var(--line); border-radius: 4px; background: #fff; cursor: pointer; color: var(--fg); text-decoration: none; }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
button.danger { color: var(--dead); }
form.inline { display: inline; margin: 0 .2rem 0 0; }
.toolbar { display: flex; flex-wrap: wrap; gap: .6rem; align-items: center; margin-bottom: .8rem; }
label { font-size: .9rem; }
input, select { font: inherit; padding: .25rem .4rem; border: 1px solid var(--line); border-radius: 4px; }
.notice { background: #e3f3ea; border: 1px solid #b9dfc8; padding: .5rem .8rem; border-radius: 4px; margin-bottom: 1rem; }
.error { background: #fbe3e0; border: 1px solid #f0b9b2; padding: .5rem .8rem; border-radius: 4px; margin-bottom: 1rem; }
.muted { color: var(--muted); }
.login { max-width: 22rem; margin: 4rem auto; }
.login input { width: 100%; margin: .3rem 0 .8rem; }
svg text { font: 11px system-ui, sans-serif; fill: var(--muted); }
svg.timeline { width: 100%; height: auto; background: var(--card); border: 1px solid var(--line); border-radius: 6px; }
.legend { display: flex; flex-wrap: wrap; gap: 1rem; font-size: .85rem; margin: .4rem 0; }
.legend i { display: inline-block; width: .8rem; height: .8rem; border-radius: 2px; margin-right: .3rem; vertical-align: -1px; }
.acked { fill: var(--ok); background: var(--ok); } .failed { fill: var(--failed); background: var(--failed); }
.dead { fill: var(--dead); } .legend .dead { background: var(--dead); } .expired { fill: var(--expired); background: var(--expired); }
.spark polyline { fill: none; stroke: var(--accent); stroke-width: 1.5; }
@media (max-width: 640px) {
  header nav { order: 3; flex-basis: 100%; }
  main { padding: .6rem; }
  th, td { padding: .3rem .35rem; }
  .figure b { font-size: 1.15rem; }
  /* tables of rows become a stack of cards: each cell on its own line under its column's
     name (data-label), the row's actions on the card, nothing to scroll sideways */
  table.cards, table.cards tbody, table.cards tr, table.cards td { display: block; width: 100%; }
  table.cards { background: none; }
  table.cards thead { display: none; }
  table.cards tr { background: var(--card); border: 1px solid var(--line); border-radius: 6px; margin-bottom: .6rem; padding: .3rem 0; }
  table.cards td { position: relative; border: 0; padding: .2rem .6rem .2rem 8.6rem; min-height: 1.6rem; white-space: normal; max-width: none; min-width: 0; text-align: left; overflow-wrap: anywhere; }
  table.cards td::before { content: attr(data-label); position: absolute; left: .6rem; width: 7.6rem; color: var(--muted); font-size: .8rem; line-height: 1.8; }
  table.cards td.actions { padding-left: .6rem; }
  table.cards td.actions[data-label] { padding-left: 8.6rem; }
  table.cards td.actions:not([data-label])::before { content: none; }
  table.cards pre { max-width: none; }
  div.actions { min-width: 0; }
  div.actions form.inline { margin: 0 .3rem .3rem 0; }
}
`;

/**
 * Live refresh: every few seconds, re-fetch the page and swap in its #live region, unless the
 * operator is typing in a form or has paused it. Confirms destructive buttons (data-confirm).
 */
export const script = `
(() => {
  const toggle = document.getElementById("live-toggle");
  const refresh = async () => {
    const live = document.getElementById("live");
    if (!live || !toggle || !toggle.checked || document.hidden) return;
    const active = document.activeElement;
    if (active && active.closest("#live form") && active.matches("input, select")) return;
    try {
      const response = await fetch(location.href, { headers: { accept: "text/html" }, credentials: "same-origin" });
      if (response.redirected || !response.ok) return;
      const next = new DOMParser().parseFromString(await response.text(), "text/html").getElementById("live");
      if (next) live.replaceWith(next);
      const stamp = document.getElementById("refreshed");
      // in UTC and saying so, like every time on the pages
      if (stamp) stamp.textContent = new Date().toISOString().slice(11, 19) + " UTC";
    } catch {}
  };
  setInterval(refresh, 2000);
  document.addEventListener("submit", (event) => {
    const message = event.submitter && event.submitter.dataset.confirm;
    if (message && !confirm(message)) event.preventDefault();
  });
})();
`;
