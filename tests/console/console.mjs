// Drives the idemd web console in a real headless Chromium, as support staff
// would: sign in, find operations by id, key and filter, read a timeline,
// reconcile an unresolved operation through its confirmation page, and be
// refused where they must be. tests/it/console.rs starts the server, seeds
// the operations, runs this, and then checks what the server holds.
//
// Every page is photographed into $IDEMD_CONSOLE_SCREENSHOTS.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

const env = (name) => {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: tests/it/console.rs runs this`);
  }
  return value;
};
const base = env("CONSOLE_URL");
const reconciler = env("TOKEN_RECONCILER");
const operationsOnly = env("TOKEN_OPERATIONS_ONLY");
const admin = env("TOKEN_ADMIN");
const succeededId = env("OP_SUCCEEDED_ID");
const unresolvedId = env("OP_UNRESOLVED_ID");
const untouchedId = env("OP_UNTOUCHED_ID");
const otherTenantId = env("OP_OTHER_TENANT_ID");
const heldName = env("HELD_OPERATION");
const heldReason = env("HELD_REASON");
const shots = env("IDEMD_CONSOLE_SCREENSHOTS");
mkdirSync(shots, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
  ],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
const page = await context.newPage();
const consoleErrors = [];
page.on("console", (message) => {
  if (message.type() === "error") consoleErrors.push(message.text());
});
const shot = async (name) => page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
const main = () => page.locator("main").innerText();

async function signIn(token) {
  await page.goto(`${base}/login`);
  await page.fill("input[name=token]", token);
  await Promise.all([page.waitForLoadState("load"), page.click("button[type=submit]")]);
}

async function search(text) {
  await page.fill("form.search input[name=q]", text);
  await Promise.all([page.waitForURL((url) => !url.pathname.startsWith("/search")), page.press("form.search input[name=q]", "Enter")]);
}

try {
  // Signed out, every page leads to the sign-in page.
  await page.goto(`${base}/unresolved`);
  assert.equal(new URL(page.url()).pathname, "/login");
  await shot("01-sign-in");

  // A service's operations-only credential is refused.
  await signIn(operationsOnly);
  assert.equal(new URL(page.url()).pathname, "/login");
  assert.match(await main(), /neither the reconcile nor the admin scope/);
  await shot("02-sign-in-refused");

  // The reconciler signs in; the session cookie is HttpOnly, Secure, Strict.
  await signIn(reconciler);
  assert.equal(new URL(page.url()).pathname, "/");
  const cookies = await context.cookies();
  const session = cookies.find((cookie) => cookie.name === "__Host-idemd-console");
  assert.ok(session, `session cookie set: ${JSON.stringify(cookies.map((c) => c.name))}`);
  assert.equal(session.httpOnly, true);
  assert.equal(session.secure, true);
  assert.equal(session.sameSite, "Strict");
  assert.equal(await page.evaluate(() => document.cookie), "", "no script can read the session");
  const dashboard = await main();
  assert.match(dashboard, /Unresolved, by age/);
  assert.match(dashboard, /waiting for reconciliation: 2\./);
  await shot("03-dashboard");

  // By operation_id: the header answers the support question.
  await search(succeededId);
  assert.equal(new URL(page.url()).pathname, `/operations/${succeededId}`);
  let text = await main();
  assert.match(text, /the effect happened; a retry replays the result/);
  assert.match(text, /"charge":"ch_seeded"/, "a JSON result is shown as text");
  assert.equal(await page.locator("svg.timeline rect.span.succeeded").count(), 1);
  await shot("04-operation-succeeded");

  // By a key alone: every operation carrying it.
  await search("order-1");
  assert.equal(new URL(page.url()).pathname, "/operations");
  text = await main();
  assert.match(text, /payments\.charge/);
  assert.equal(await page.locator("table.operations tbody tr").count(), 1);
  await shot("05-search-by-key");

  // By filter.
  await search("state:unknown op:payments.*");
  text = await main();
  assert.equal(await page.locator("table.operations tbody tr").count(), 2, text);
  await shot("06-search-by-filter");

  // By operation/key: the unresolved one, its timeline showing the unknown stretch.
  await search("payments.charge/order-2");
  assert.equal(new URL(page.url()).pathname, `/operations/${unresolvedId}`);
  text = await main();
  assert.match(text, /outcome unknown: check the provider, then reconcile/);
  assert.equal(await page.locator("svg.timeline rect.span.unknown").count(), 1);
  assert.ok((await page.locator("svg.timeline rect.gap").count()) >= 1, "the unknown stretch is drawn");
  await shot("07-operation-unknown");

  // Its diagnosis: stuck, the plan looks at the provider before it
  // reconciles; selecting "the provider showed the effect" makes the first
  // move the reconciliation.
  assert.equal(await page.locator("section.diagnosis h2").innerText(), "Diagnosis");
  assert.equal(await page.locator("p.diagnosis-headline").getAttribute("data-cause"), "StuckInProgress");
  await page.selectOption("form.evidence select[name=provider]", "found");
  await page.fill("form.evidence input[name=looked]", "5");
  await Promise.all([page.waitForURL((url) => url.searchParams.get("provider") === "found"), page.click("form.evidence button[type=submit]")]);
  assert.equal(await page.locator("ol.plan li").first().getAttribute("data-move"), "Reconcile");
  await shot("07b-operation-diagnosis");

  // The work queue, oldest first, with one click to reconcile.
  await page.goto(`${base}/unresolved`);
  assert.equal(await page.locator("table.queue tbody tr").count(), 2);
  await shot("08-unresolved-queue");
  await page.click(`a[href="/operations/${unresolvedId}/reconcile"]`);
  assert.match(await main(), /NOT_APPLIED grants one more attempt: the caller's next Claim executes the effect/);
  await shot("09-reconcile-choose");

  // SUCCEEDED with the provider's evidence; the confirmation states the consequence.
  const succeededForm = page.locator("form.choice").filter({ hasText: "It happened" });
  await succeededForm.locator("textarea[name=body]").fill('{"charge":"ch_from_console"}');
  await Promise.all([page.waitForLoadState("load"), succeededForm.locator("button[type=submit]").click()]);
  text = await main();
  assert.match(text, /SUCCEEDED records this result: the caller's next Claim replays it/);
  await shot("10-reconcile-confirm");
  await Promise.all([page.waitForURL(/done=reconciled/), page.click("section.confirm button[type=submit]")]);
  text = await main();
  assert.match(text, /Reconciled\. This is the operation as the server holds it now\./);
  assert.match(text, /the effect happened; a retry replays the result/);
  assert.match(text, /ch_from_console/);
  await shot("11-reconciled");

  // A forged request without the session's CSRF token changes nothing.
  const forged = await page.evaluate(async (id) => {
    const response = await fetch(`/operations/${id}/reconcile`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "expected_fence=1&step=apply&resolution=not_applied",
    });
    return { status: response.status, body: await response.text() };
  }, untouchedId);
  assert.equal(forged.status, 403);
  assert.match(forged.body, /CSRF_TOKEN_INVALID/);

  // Another tenant's operation does not exist for this credential.
  const other = await page.goto(`${base}/operations/${otherTenantId}`);
  assert.equal(other.status(), 404);
  assert.match(await main(), /NotFound/);
  await shot("12-other-tenant-refused");

  // The conflicts page reads the database: the reconciler sees its own
  // tenant's refused Claim (order-1's), grouped by operation name, linked
  // to the conflicted operations.
  await page.goto(`${base}/conflicts`);
  assert.equal(await page.locator("table.conflicts tbody tr").count(), 1, await main());
  assert.match(await main(), /From the database, for this tenant/);
  await Promise.all([
    page.waitForURL(/\/operations\?filter=/),
    page.click("table.conflicts tbody tr a"),
  ]);
  assert.equal(await page.locator("table.operations tbody tr").count(), 1, await main());

  // A hold set through the API (tests/it/console.rs): the dashboard says so
  // with a count and a link, and the holds page lists it, reason as text.
  await page.goto(`${base}/`);
  assert.equal(await page.locator("section.held-banner .holds-count").innerText(), "1", await main());
  await Promise.all([page.waitForURL(/\/holds$/), page.click("section.held-banner a[href='/holds']")]);
  assert.equal(await page.locator("table.holds tbody tr").count(), 1, await main());
  text = await main();
  assert.match(text, new RegExp(heldName.replace(".", "\\.")));
  assert.ok(text.includes(heldReason), `the reason as text: ${text}`);
  assert.equal(await page.locator("table.holds script").count(), 0, "markup in a reason stays text");
  assert.equal(await page.locator("form.release, form.hold").count(), 0, "a reconciler changes no hold");
  await shot("12b-holds-reconciler");

  // Signing out ends the session on the server.
  await Promise.all([page.waitForURL(/\/login$/), page.click(".who form button")]);
  await page.goto(`${base}/`);
  assert.equal(new URL(page.url()).pathname, "/login");

  // An admin sees every tenant: the tenant named on each row, and every
  // tenant's conflicts by operation name.
  await signIn(admin);
  await page.goto(`${base}/operations?order=oldest`);
  text = await main();
  assert.match(text, /tenant-b/);
  assert.equal(await page.locator("table.operations tbody tr").count(), 4, text);
  await shot("13-operations-admin");
  await page.goto(`${base}/conflicts`);
  assert.equal(await page.locator("table.conflicts tbody tr").count(), 1, await main());
  await shot("14-conflicts");
  await page.goto(`${base}/`);
  await shot("15-dashboard-admin");

  // An admin reconciles another tenant's operation on its behalf: the row's
  // link names the tenant, and the API checks it.
  await page.goto(`${base}/operations?filter=${encodeURIComponent("state:unknown")}`);
  await Promise.all([
    page.waitForLoadState("load"),
    page.click(`a[href="/operations/${otherTenantId}?tenant=tenant-b"]`),
  ]);
  text = await main();
  assert.match(text, /tenant-b/);
  assert.match(text, /outcome unknown/);
  await page.click(`a[href="/operations/${otherTenantId}/reconcile?tenant=tenant-b"]`);
  // FAILED and NOT_APPLIED wait for the last attempt's deadline; the page says so.
  assert.match(await main(), /only once the last attempt's deadline has passed/);
  const onBehalf = page.locator("form.choice").filter({ hasText: "It happened" });
  await onBehalf.locator("textarea[name=body]").fill('{"charge":"ch_on_behalf"}');
  await Promise.all([page.waitForLoadState("load"), onBehalf.locator("button[type=submit]").click()]);
  assert.match(await main(), /SUCCEEDED records this result/);
  await Promise.all([page.waitForLoadState("load"), page.click("section.confirm button[type=submit]")]);
  text = await main();
  assert.match(page.url(), /done=reconciled/, text);
  assert.match(text, /the effect happened; a retry replays the result/);
  assert.match(text, /ch_on_behalf/);
  assert.match(text, /token:support-lead \(admin, on behalf\)/);
  await shot("16-admin-reconciled-on-behalf");

  // The admin holds all of tenant B from the console and releases tenant A's
  // hold; tests/it/console.rs then reads what the server holds and audited.
  await page.click("header.top nav a[href='/holds']");
  await page.waitForURL(/\/holds$/);
  assert.equal(await page.locator("table.holds tbody tr").count(), 1, await main());
  const holdForm = page.locator("form.hold");
  await holdForm.locator("input[name=tenant]").fill("tenant-b");
  await holdForm.locator("input[name=what][value=tenant]").check();
  await holdForm.locator("input[name=reason]").fill("incident 43: tenant-b drains");
  await Promise.all([page.waitForURL(/done=held/), holdForm.locator("button[type=submit]").click()]);
  assert.equal(await page.locator("table.holds tbody tr").count(), 2, await main());
  assert.match(await main(), /whole tenant/);
  await shot("17-admin-held-tenant-b");
  const heldRow = page.locator("table.holds tbody tr").filter({ hasText: heldName });
  // The reason is required: the browser keeps an empty one from being sent
  // (and the API refuses one: tests/it/console_holds.rs).
  assert.equal(await heldRow.locator("input[name=reason]").evaluate((input) => input.validity.valueMissing), true);
  await heldRow.locator("input[name=reason]").fill("drained and reconciled");
  await Promise.all([page.waitForURL(/done=released/), heldRow.locator("button[type=submit]").click()]);
  assert.equal(await page.locator("table.holds tbody tr").count(), 1, await main());
  assert.doesNotMatch(await main(), new RegExp(heldName.replace(".", "\\.")));
  await shot("18-admin-released");
  await Promise.all([page.waitForURL(/\/login$/), page.click(".who form button")]);

  // The refusals above log their 403 and 404 as failed loads; anything
  // else (a CSP violation, a script error) is a defect.
  const unexpected = consoleErrors.filter((text) => !text.startsWith("Failed to load resource"));
  assert.deepEqual(unexpected, [], "no script error or CSP violation in the browser console");
  console.log("console: every step passed");
} finally {
  await browser.close();
}
