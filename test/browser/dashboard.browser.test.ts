// The dashboard end to end in headless Chromium (Debian's package, driven by playwright-core)
// against the real local stack: log in, watch a subscription, make a key dead, retry it from
// the dead-letters page and watch it drain. CORQ_SCREENSHOTS=1 also writes docs/*.png.
import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromium, type Browser, type Page } from "playwright-core";
import { startReceiver } from "../helpers/receiver.js";
import { eventually, useStack } from "../helpers/stack.js";
import { present } from "../helpers/present.js";

const executablePath = process.env.CORQ_CHROMIUM ?? "/usr/bin/chromium";
const browserFound = existsSync(executablePath);
if (!browserFound && process.env.CORQ_REQUIRE_BROWSER) {
  throw new Error(
    `Chromium is required here (CORQ_REQUIRE_BROWSER) but ${executablePath} does not exist: apt-get install chromium`,
  );
}
if (!browserFound) {
  console.warn(
    `\n  SKIPPING the dashboard browser tests: no Chromium at ${executablePath} (apt-get install chromium, or set CORQ_CHROMIUM)\n`,
  );
}

describe.skipIf(!browserFound)("dashboard in a real browser", () => {
  const { state, api } = useStack();
  let browser: Browser;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let accepting = false;
  // browser-many: the receiver refuses every key until it is let through here
  const letThrough = new Set<string>();

  beforeAll(async () => {
    browser = await chromium.launch({
      executablePath,
      args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    });
    receiver = await startReceiver(() => undefined);
    receiver.behave((d) => {
      if (d.subscription === "browser-many") return letThrough.has(d.key) ? undefined : { status: 503 };
      return accepting ? undefined : { status: 503 };
    });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await receiver?.close();
  });

  const url = (path: string) => `${state.stack.url}${path}`;

  async function logIn(page: Page, token: string) {
    await page.goto(url("/"));
    await page.getByLabel("Token", { exact: true }).fill(token);
    await page.getByRole("button", { name: "Log in" }).click();
  }

  it("refuses a wrong token and keeps the dashboard behind the login", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(url("/ui/dead-letters"));
    expect(new URL(page.url()).pathname).toBe("/login");
    const refused = page.waitForResponse((r) => r.url().endsWith("/login") && r.request().method() === "POST");
    await logIn(page, "not-the-token");
    expect((await refused).status()).toBe(401);
    await expect.poll(() => page.getByRole("alert").textContent()).toContain("Wrong token");
    expect(await context.cookies()).toEqual([]);
    // an action without a session changes nothing
    const action = await fetch(url("/ui/actions/pause"), {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: state.stack.url },
      body: "subscription=greeter&back=/",
    });
    expect(action.status).toBe(401);
    expect((await api("GET", "/subscriptions/greeter")).json.paused).toBe(false);
    await context.close();
  });

  it("shows a subscription and its lag, dead-letters a key, retries it with a click and watches it drain", async () => {
    // a push subscription whose receiver is down: the key "ping-a" dies on its first attempt
    expect(
      (
        await api("PUT", "/subscriptions/browser-feed", {
          body: {
            events: ["Ping"],
            key: "stream",
            from: "now",
            maxAttempts: 1,
            deliver: { url: receiver.url, timeoutMs: 2000 },
          },
        })
      ).status,
    ).toBe(201);
    await api("POST", "/subscriptions/browser-feed/pause");
    for (let i = 1; i <= 3; i++)
      await api("POST", "/streams/ping-a/events", { body: { events: [{ name: "Ping", data: { n: i } }] } });
    await exampleTraffic();

    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    // the pages live within their content security policy: nothing refused
    const refused: string[] = [];
    page.on("console", (message) => {
      if (/Content Security Policy/i.test(message.text())) refused.push(message.text());
    });
    await logIn(page, state.stack.adminToken);
    await page.waitForURL(url("/"));
    const [cookie] = await context.cookies();
    expect(cookie).toMatchObject({ name: "corq_session", httpOnly: true, sameSite: "Strict" });
    expect(present(cookie, "the session cookie").value).not.toContain(state.stack.adminToken);
    // the session is for the dashboard only: the JSON API still wants the bearer token
    expect((await context.request.get(url("/stats"))).status()).toBe(401);

    const row = page.locator('tr[data-subscription="browser-feed"]');
    await expect.poll(() => row.getByTestId("pending").textContent()).toBe("3");
    expect(await row.textContent()).toContain("paused");
    const { lag } = (await api("GET", "/subscriptions/browser-feed")).json;
    await page.reload();
    expect(await row.getByTestId("lag").textContent()).toBe(String(lag));
    for (const name of ["greeter", "room-occupancy", "visitor-directory"]) {
      expect(await page.locator(`tr[data-subscription="${name}"]`).count()).toBe(1);
    }

    // resume from the dashboard; the receiver refuses, the key dies
    await row.getByRole("button", { name: "Resume browser-feed" }).click();
    await expect.poll(() => page.getByRole("status").first().textContent()).toContain("browser-feed resumed");
    await api("POST", "/dispatch");
    // live refresh (no reload) shows the dead key
    await expect
      .poll(() => page.locator('tr[data-subscription="browser-feed"]').getByTestId("dead").textContent(), {
        timeout: 20_000,
      })
      .toBe("1");

    await page.getByRole("link", { name: "Dead letters" }).click();
    const dead = page.locator('tr[data-key="ping-a"]');
    expect(await dead.textContent()).toContain("Ping");
    expect(await dead.textContent()).toContain('{"n": 1}');
    expect(await dead.textContent()).toContain("503");

    accepting = true;
    await dead.getByRole("button", { name: "Retry ping-a" }).click();
    await expect
      .poll(() => page.getByRole("status").first().textContent())
      .toContain("Retried 1 dead key of browser-feed");
    await api("POST", "/dispatch");
    await eventually(async () => {
      const delivered = receiver.deliveries.filter(
        (d) => d.subscription === "browser-feed" && d.key === "ping-a" && d.events.length > 0,
      );
      expect(delivered.at(-1)!.events.map((e) => e.data)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    });
    await expect.poll(() => page.getByText("No dead letters.").count(), { timeout: 20_000 }).toBe(1);
    expect((await api("GET", "/subscriptions/browser-feed")).json).toMatchObject({ pending: 0, keys: { dead: 0 } });

    // the keys page, the timeline and the stream browser
    await page.goto(url("/ui/subscriptions/browser-feed?status=idle"));
    expect(await page.locator('tr[data-key="ping-a"]').textContent()).toContain("idle");
    await page.goto(url("/ui/timeline?subscription=browser-feed"));
    expect(await page.locator("svg.timeline rect.dead").count()).toBe(1);
    expect(await page.locator("svg.timeline rect.acked").count()).toBeGreaterThanOrEqual(1);
    await page.goto(url("/ui/streams"));
    await page.getByLabel("Stream").fill("ping-a");
    await page.getByRole("button", { name: "Open" }).click();
    expect(await page.getByRole("table", { name: "Events of ping-a" }).locator("tbody tr").count()).toBe(3);

    // a refusal is a page with its status, not a stack trace
    expect((await page.goto(url("/ui/subscriptions/nope")))!.status()).toBe(404);
    expect(await page.getByRole("alert").textContent()).toContain('no subscription named "nope"');
    expect((await page.goto(url("/ui/subscriptions/browser-feed?status=sleeping")))!.status()).toBe(400);

    // a narrow screen: nothing wider than the viewport but the tables' own scroll boxes
    await page.setViewportSize({ width: 390, height: 800 });
    for (const path of [
      "/",
      "/ui/dead-letters",
      "/ui/timeline",
      "/ui/subscriptions/browser-feed",
      "/ui/streams",
      "/ui/alerts",
    ]) {
      await page.goto(url(path));
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      expect(overflow, path).toBeLessThanOrEqual(0);
    }
    await page.setViewportSize({ width: 1280, height: 800 });

    if (process.env.CORQ_SCREENSHOTS) await screenshots(page);
    expect(refused).toEqual([]);
    await context.close();
  }, 90_000);

  it("Skip and Retry on one row of several dead keys act on that key only", async () => {
    const keys = ["tick-1", "tick-2", "tick-3", "tick-4"];
    expect(
      (
        await api("PUT", "/subscriptions/browser-many", {
          body: {
            events: ["Tick"],
            key: "stream",
            from: "now",
            maxAttempts: 1,
            deliver: { url: receiver.url, timeoutMs: 2000 },
          },
        })
      ).status,
    ).toBe(201);
    for (const key of keys) {
      await api("POST", `/streams/${key}/events`, {
        body: {
          events: [
            { name: "Tick", data: { key, n: 1 } },
            { name: "Tick", data: { key, n: 2 } },
          ],
        },
      });
    }
    const deadKeys = async () =>
      (
        (await api("GET", "/dead-letters?subscription=browser-many")).json.deadLetters as {
          key: string;
          position: number;
        }[]
      )
        .map((d) => `${d.key}@${d.position}`)
        .sort();
    const all = await eventually(
      async () => {
        await api("POST", "/dispatch");
        const dead = await deadKeys();
        expect(dead).toHaveLength(4);
        return dead;
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );
    const deadAt = (key: string) => all.find((d) => d.startsWith(`${key}@`))!;

    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    page.on("dialog", (dialog) => dialog.accept()); // Skip asks to confirm
    await logIn(page, state.stack.adminToken);
    await page.waitForURL(url("/"));

    // dead-letters page: Skip on tick-2's row
    await page.goto(url("/ui/dead-letters?subscription=browser-many"));
    await page.getByRole("checkbox", { name: "Refresh live" }).uncheck();
    expect(await page.locator('tr[data-subscription="browser-many"]').count()).toBe(4);
    await page
      .locator('tr[data-key="tick-2"]')
      .getByRole("button", { name: "Skip the failed event of tick-2" })
      .click();
    await expect
      .poll(() => page.getByRole("status").first().textContent())
      .toContain("Skipped the failed event of 1 dead key of browser-many");
    expect(await deadKeys()).toEqual([deadAt("tick-1"), deadAt("tick-3"), deadAt("tick-4")]);

    // keys page: Retry on tick-3's row
    await page.goto(url("/ui/subscriptions/browser-many?status=dead"));
    await page.getByRole("checkbox", { name: "Refresh live" }).uncheck();
    expect(await page.locator("tbody tr[data-key]").count()).toBe(3);
    await page.locator('tr[data-key="tick-3"]').getByRole("button", { name: "Retry tick-3" }).click();
    await expect
      .poll(() => page.getByRole("status").first().textContent())
      .toContain("Retried 1 dead key of browser-many");
    expect(await deadKeys()).toEqual([deadAt("tick-1"), deadAt("tick-4")]);

    // delivery: tick-2 without its skipped first event, tick-3 from its failed one; the others stay dead
    letThrough.add("tick-2").add("tick-3");
    const delivered = (key: string) =>
      receiver.deliveries.filter((d) => d.subscription === "browser-many" && d.key === key && d.events.length > 0);
    await eventually(
      async () => {
        await api("POST", "/dispatch");
        expect(
          delivered("tick-2")
            .at(-1)!
            .events.map((e) => e.data),
        ).toEqual([{ key: "tick-2", n: 2 }]);
        expect(
          delivered("tick-3")
            .at(-1)!
            .events.map((e) => e.data),
        ).toEqual([
          { key: "tick-3", n: 1 },
          { key: "tick-3", n: 2 },
        ]);
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );
    for (const key of ["tick-1", "tick-4"]) expect(delivered(key)).toHaveLength(1); // its one failed attempt
    expect(await deadKeys()).toEqual([deadAt("tick-1"), deadAt("tick-4")]);
    await context.close();
  }, 90_000);

  it("shows who holds a key and why keys are not running; pauses, resumes and rewinds one key", async () => {
    expect(
      (
        await api("PUT", "/subscriptions/browser-rooms", {
          body: {
            events: ["Visit"],
            key: "data.room",
            from: "now",
            maxAttempts: 1,
            // room-slow's delivery is held for the rest of the test (a lease to show)
            leaseMs: 120_000,
            deliver: { url: receiver.url, timeoutMs: 100_000 },
          },
        })
      ).status,
    ).toBe(201);
    receiver.behave((d) => {
      if (d.subscription === "browser-many") return letThrough.has(d.key) ? undefined : { status: 503 };
      if (d.subscription !== "browser-rooms") return accepting ? undefined : { status: 503 };
      if (d.key === "room-dead") return { status: 503 };
      if (d.key === "room-slow") return { delayMs: 95_000 };
      return undefined;
    });
    const visit = (room: string, n: number) =>
      api("POST", `/streams/visits-${room}/events`, {
        body: { events: Array.from({ length: n }, (_, i) => ({ name: "Visit", data: { room, i } })) },
      });
    expect((await api("POST", "/subscriptions/browser-rooms/keys/room-paused/pause")).status).toBe(200);
    for (const [room, n] of [
      ["room-a", 3],
      ["room-dead", 1],
      ["room-slow", 1],
      ["room-paused", 2],
    ] as const)
      await visit(room, n);
    const rooms = (key: string) =>
      receiver.deliveries.filter((d) => d.subscription === "browser-rooms" && d.key === key && d.events.length > 0);
    await eventually(
      async () => {
        await api("POST", "/dispatch");
        const keys = (await api("GET", "/subscriptions/browser-rooms/keys")).json.keys as {
          key: string;
          status: string;
        }[];
        expect(Object.fromEntries(keys.map((k) => [k.key, k.status]))).toEqual({
          "room-a": "idle",
          "room-dead": "dead",
          "room-paused": "paused",
          "room-slow": "leased",
        });
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );

    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    page.on("dialog", (dialog) => dialog.accept()); // Rewind asks to confirm
    await logIn(page, state.stack.adminToken);
    await page.waitForURL(url("/"));
    await page.goto(url("/ui/subscriptions/browser-rooms"));
    await page.getByRole("checkbox", { name: "Refresh live" }).uncheck();
    const rowOf = (key: string) => page.locator(`tr[data-key="${key}"]`);
    expect(await rowOf("room-slow").textContent()).toMatch(
      /worker invocation [0-9a-f]{8}.*leased by worker invocation/,
    );
    expect(await rowOf("room-dead").textContent()).toContain("dead at position");
    expect(await rowOf("room-paused").textContent()).toMatch(/paused since \S+; 2 events wait/);
    if (process.env.CORQ_SCREENSHOTS) {
      await page.setViewportSize({ width: 1440, height: 800 });
      await page.screenshot({ path: "docs/keys.png", fullPage: true });
      await page.setViewportSize({ width: 1280, height: 800 });
    }

    await rowOf("room-paused").getByRole("button", { name: "Resume key room-paused" }).click();
    await expect
      .poll(() => page.getByRole("status").first().textContent())
      .toContain("A key of browser-rooms resumed.");
    await eventually(async () => expect(rooms("room-paused").flatMap((d) => d.events)).toHaveLength(2), {
      timeoutMs: 20_000,
    });

    await page.getByRole("checkbox", { name: "Refresh live" }).uncheck();
    await rowOf("room-a").getByLabel("Rewind position for key room-a").fill("beginning");
    await rowOf("room-a").getByRole("button", { name: "Rewind key room-a" }).click();
    await expect
      .poll(() => page.getByRole("status").first().textContent())
      .toContain("Rewound browser-rooms: 3 events queued again.");
    await eventually(
      async () => {
        const replayed = rooms("room-a")
          .flatMap((d) => d.events)
          .filter((e) => e.replay);
        expect(replayed.map((e) => [e.data, e.seq])).toEqual([
          [{ room: "room-a", i: 0 }, 4],
          [{ room: "room-a", i: 1 }, 5],
          [{ room: "room-a", i: 2 }, 6],
        ]);
      },
      { timeoutMs: 20_000 },
    );
    await context.close();
  }, 90_000);

  it("refuses a cross-site form post even with a session; a same-site one for an unknown subscription gets an error page", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await logIn(page, state.stack.adminToken);
    await page.waitForURL(url("/"));
    const response = await context.request.post(url("/ui/actions/pause"), {
      headers: { origin: "https://evil.example" },
      form: { subscription: "greeter", back: "/" },
    });
    expect(response.status()).toBe(403);
    expect((await api("GET", "/subscriptions/greeter")).json.paused).toBe(false);
    // same origin, but no such subscription: an error page, not JSON
    const unknown = await context.request.post(url("/ui/actions/retry"), {
      headers: { origin: state.stack.url },
      form: { subscription: "nope", back: "/" },
      maxRedirects: 0,
    });
    expect(unknown.status()).toBe(404);
    expect(unknown.headers()["content-type"]).toContain("text/html");
    expect(await unknown.text()).toContain("no subscription named &quot;nope&quot;");
    await context.close();
  });

  it("at 390 px: rows are cards with their actions on screen, nothing scrolls sideways, JSON wraps between members", async () => {
    expect(
      (
        await api("PUT", "/subscriptions/browser-narrow", {
          body: {
            events: ["Order"],
            key: "stream",
            // a Tenant column in its keys table (a card's row at 390 px)
            tenant: "data.customer.region",
            from: "now",
            maxAttempts: 1,
            deliver: { url: receiver.url, timeoutMs: 2000 },
          },
        })
      ).status,
    ).toBe(201);
    receiver.behave((d) => (d.subscription === "browser-narrow" ? { status: 503 } : undefined));
    // JSON without a space of its own: compact, a narrow cell could only break it inside a token
    const data = {
      ids: Array.from({ length: 12 }, (_, i) => `order-${String(i + 1).padStart(4, "0")}`),
      customer: { id: "c-12345", region: "eu-west-1" },
    };
    await api("POST", "/streams/narrow-1/events", { body: { events: [{ name: "Order", data }] } });
    await eventually(
      async () => {
        await api("POST", "/dispatch");
        expect((await api("GET", "/subscriptions/browser-narrow")).json.keys.dead).toBe(1);
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );

    const context = await browser.newContext({ viewport: { width: 390, height: 844 } });
    const page = await context.newPage();
    await logIn(page, state.stack.adminToken);
    await page.waitForURL(url("/"));

    /** Nothing scrolls sideways: not the page, not a table's scroll box. */
    const sideways = () =>
      page.evaluate(() => [
        document.documentElement.scrollWidth - window.innerWidth,
        ...Array.from(document.querySelectorAll(".scroll")).map((box) => box.scrollWidth - box.clientWidth),
      ]);
    /** The element lies inside the viewport's width. */
    const onScreen = async (locator: ReturnType<Page["locator"]>) => {
      const box = await locator.boundingBox();
      expect(box).not.toBeNull();
      expect(box!.x).toBeGreaterThanOrEqual(0);
      expect(box!.x + box!.width).toBeLessThanOrEqual(390);
    };

    // an alert whose receiver refuses it (503, as the deliveries above): its row shows the error
    const alert = { url: `${receiver.url}?token=${"x".repeat(60)}`, on: ["key.dead"] };
    expect((await api("PUT", "/alerts/browser-narrow-alert", { body: alert })).status).toBe(201);
    await api("POST", "/streams/narrow-2/events", { body: { events: [{ name: "Order", data }] } });
    await eventually(
      async () => {
        await api("POST", "/dispatch");
        await api("POST", "/alerts/check");
        const [listed] = (await api("GET", "/alerts")).json.alerts;
        expect(listed.lastSend).toMatchObject({ error: "HTTP 503" });
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );

    for (const path of [
      "/",
      "/ui/dead-letters",
      "/ui/timeline",
      "/ui/subscriptions/browser-narrow",
      "/ui/streams",
      "/ui/alerts",
    ]) {
      await page.goto(url(path));
      for (const overflow of await sideways()) expect(overflow, path).toBeLessThanOrEqual(0);
    }

    await page.goto(url("/"));
    await onScreen(
      page.locator('tr[data-subscription="browser-narrow"]').getByRole("button", { name: "Pause browser-narrow" }),
    );

    await page.goto(url("/ui/dead-letters?subscription=browser-narrow"));
    await page.getByRole("checkbox", { name: "Refresh live" }).uncheck();
    const row = page.locator('tr[data-key="narrow-1"]');
    await onScreen(row.getByRole("button", { name: "Retry narrow-1" }));
    await onScreen(row.getByRole("button", { name: "Skip the failed event of narrow-1" }));
    // each cell says what it is (the column's name, as the table's header did)
    expect(await row.locator('td[data-label="Error"]').count()).toBe(1);
    // where the event's JSON wraps: after a space between members, never inside a token
    const breaks = await row.locator('td[data-label="Data"] pre').evaluate((pre) => {
      // every character of the cell in order (the text is split over several nodes), and where a new line starts
      const chars: { text: Text; at: number }[] = [];
      const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const text = node as Text;
        for (let at = 0; at < text.length; at++) chars.push({ text, at });
      }
      const all = chars.map((c) => c.text.data[c.at]).join("");
      const found: string[] = [];
      let top: number | null = null;
      chars.forEach(({ text, at }, i) => {
        const range = document.createRange();
        range.setStart(text, at);
        range.setEnd(text, at + 1);
        const rect = range.getClientRects()[0];
        if (!rect) return;
        if (top !== null && rect.top > top + 2)
          found.push(`${all.slice(Math.max(0, i - 6), i)}|${all.slice(i, i + 6)}`);
        top = rect.top;
      });
      return found;
    });
    expect(breaks.length).toBeGreaterThan(1);
    for (const at of breaks) expect(at, breaks.join("  ")).toMatch(/[,:] \|/);

    await page.goto(url("/ui/subscriptions/browser-narrow"));
    await page.getByRole("checkbox", { name: "Refresh live" }).uncheck();
    const key = page.locator('tr[data-key="narrow-1"]');
    await onScreen(key.getByRole("button", { name: "Retry narrow-1" }));
    await onScreen(key.getByRole("button", { name: "Pause key narrow-1" }));
    await onScreen(key.getByRole("button", { name: "Rewind key narrow-1" }));
    const tenant = key.locator('td[data-label="Tenant"]');
    await onScreen(tenant);
    expect(await tenant.textContent()).toBe("eu-west-1");
    if (process.env.CORQ_SCREENSHOTS) {
      await page.goto(url("/ui/dead-letters"));
      await page.screenshot({ path: "docs/narrow.png", fullPage: true });
    }
    await context.close();
  }, 90_000);

  /** Visitors of the example app, so the other subscriptions have work and the charts have data. */
  async function exampleTraffic() {
    const names = ["Registered", "Arrived", "Departed"];
    for (let i = 0; i < 24; i++) {
      const visitor = `visitor-${i % 8}`;
      await api("POST", `/streams/${visitor}/events`, {
        body: {
          events: [{ name: names[Math.floor(i / 8) % 3], data: { name: `Visitor ${i % 8}`, roomId: `room-${i % 3}` } }],
        },
      });
    }
  }

  async function screenshots(page: Page) {
    await exampleTraffic();
    await page.goto(url("/"));
    await page.screenshot({ path: "docs/overview.png", fullPage: true });
    await page.goto(url("/ui/timeline"));
    await page.screenshot({ path: "docs/timeline.png", fullPage: true });
  }
});
