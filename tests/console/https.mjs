// The web console over HTTPS in a real headless Chromium: the browser trusts
// the console's certificate by its public key (--ignore-certificate-errors-spki-list,
// which accepts that key only, not any certificate error) and resolves the
// certificate's name to 127.0.0.1 (--host-resolver-rules). It signs in, reads
// the unresolved queue and signs out through the CSRF-protected form, with the
// Origin and Sec-Fetch-Site headers Chromium itself sends over HTTPS; every
// answer carries HSTS. tests/it/console_tls.rs starts the server and runs this.
import assert from "node:assert/strict";
import { chromium } from "playwright-core";

const env = (name) => {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: tests/it/console_tls.rs runs this`);
  }
  return value;
};
const base = env("CONSOLE_URL");
const spki = env("CONSOLE_SPKI");
const resolve = env("CONSOLE_RESOLVE");
const token = env("TOKEN_RECONCILER");
const unresolvedId = env("OP_UNRESOLVED_ID");

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    `--ignore-certificate-errors-spki-list=${spki}`,
    `--host-resolver-rules=${resolve}`,
  ],
});
const context = await browser.newContext();
const page = await context.newPage();
const hsts = [];
page.on("response", (response) => {
  if (response.url().startsWith(base)) {
    hsts.push([response.url(), response.headers()["strict-transport-security"]]);
  }
});

try {
  const login = await page.goto(`${base}/login`);
  assert.equal(login.status(), 200);
  const security = await login.securityDetails();
  assert.ok(security, "served over TLS");
  assert.equal(security.protocol, "TLS 1.3");

  await page.fill("input[name=token]", token);
  await Promise.all([page.waitForLoadState("load"), page.click("button[type=submit]")]);
  assert.equal(new URL(page.url()).pathname, "/", `signed in: ${await page.locator("main").innerText()}`);
  const session = (await context.cookies()).find((cookie) => cookie.name === "__Host-idemd-console");
  assert.ok(session, "the session cookie");
  assert.equal(session.secure, true);
  assert.equal(session.httpOnly, true);

  await page.goto(`${base}/unresolved`);
  assert.ok(await page.locator(`main a[href*="${unresolvedId}"]`).count() > 0, "the unresolved operation is listed");

  // Signing out is a form with the CSRF token, checked against the origin
  // Chromium sends: https://NAME:PORT.
  await Promise.all([page.waitForURL((url) => url.pathname === "/login"), page.click("form[action='/logout'] button")]);
  await page.goto(`${base}/unresolved`);
  assert.equal(new URL(page.url()).pathname, "/login", "signed out");

  assert.ok(hsts.length >= 5, `answers seen: ${hsts.length}`);
  for (const [url, value] of hsts) {
    assert.equal(value, "max-age=31536000", url);
  }
  console.log(`https console: ${hsts.length} answers, each with HSTS`);
} finally {
  await browser.close();
}
