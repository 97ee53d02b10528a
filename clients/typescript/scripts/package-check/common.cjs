// What both consumers do with the installed package against a real idemd (IDEMD_ADDR,
// IDEMD_TOKEN): a Claim and a Complete by hand, then executeOnce twice on one key,
// counting the effect's runs (once) rather than the answers.
const assert = require("node:assert/strict");
const { randomUUID } = require("node:crypto");

async function check(kind, Client, Success) {
  const client = Client.fromEnv();
  try {
    const key = `pkg-${kind}-${randomUUID()}`;
    const claimed = await client.claim("package.check", key, { jsonPayload: '{"n":1}' });
    assert.equal(claimed.outcome, "acquired");
    const { operation_id, fence } = claimed.acquired.ownership;
    const done = await client.complete(operation_id, fence, Buffer.from("done"), { contentType: "text/plain" });
    assert.equal(done.state, "OPERATION_STATE_SUCCEEDED");
    const again = await client.claim("package.check", key, { jsonPayload: '{"n":1}' });
    assert.equal(again.outcome, "completed");
    assert.equal(again.completed.result.body.toString(), "done");

    let effects = 0;
    const charge = () => client.executeOnce("package.charge", `${key}-charge`, { amount: 1 }, async () => {
      effects += 1;
      return new Success(Buffer.from('{"charge":"ch_1"}'), "application/json");
    }, { providerDeduplicates: true });
    const first = await charge();
    const second = await charge();
    assert.equal(effects, 1);
    assert.equal(first.replayed, false);
    assert.equal(second.replayed, true);
    assert.equal(second.body.toString(), '{"charge":"ch_1"}');
  } finally {
    client.close();
  }
  console.log(`${kind}: Claim, Complete, replay and executeOnce (1 effect) ok`);
}

module.exports = { check };
