/**
 * An agent creates an order at most once through idemd, although its first attempt
 * times out after the provider created the order and it then retries ten times at once.
 *
 *     cargo run --release -- serve --dev                      # in another terminal
 *     cd clients/typescript && npm install && npm run build
 *     IDEMD_TOKEN=$(cat ../../idemd-data/dev-token) node dist/examples/orders.js
 *
 * The provider (simulated here) does not deduplicate creations, but supports lookup
 * by client reference (the agent's idempotency key): the call passes that lookup, the
 * choice every executeOnce call makes (a lookup, or providerDeduplicates: true for a
 * provider that honours the key it is given). The first attempt's call creates the order but its answer never
 * comes back; the attempt is aborted at its deadline and reported UNKNOWN. Ten
 * concurrent retries of the same intent follow: one owns the next attempt, is told an
 * earlier attempt may have taken effect (ReconcileFirst), finds the order by its
 * reference and records it; the others wait and get that record replayed. A retry with
 * a changed amount is refused as a conflict.
 */
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
// In an application: from "@idemd/client".
import { Client, ConflictError, executeOnce, OutcomeUnknownError, type Result, Success } from "../src/index.js";

const OPERATION = "orders.create";

interface Order { order_id: string; amount: number; currency: string }

/** An order API that creates an order per call and finds orders by client reference. */
class OrderProvider {
  orders = new Map<string, Order>();
  answerDelay = 0;
  private ids = 0;

  async createOrder(clientReference: string, amount: number, currency: string, signal: AbortSignal): Promise<Order> {
    this.ids += 1;
    const order = { order_id: `ord_${this.ids}`, amount, currency };
    this.orders.set(clientReference, order); // the order exists from here on
    await new Promise<void>((resolve, reject) => { // ... and the answer may be slow
      const timer = setTimeout(resolve, this.answerDelay * 1000);
      signal.addEventListener("abort", () => {
        clearTimeout(timer);
        reject(new Error("the call was aborted"));
      }, { once: true });
    });
    return order;
  }

  async findOrder(clientReference: string): Promise<Order | undefined> {
    return this.orders.get(clientReference);
  }
}

class Agent {
  constructor(private readonly client: Client, private readonly provider: OrderProvider) {}

  createOrder(key: string, amount: number, currency = "EUR"): Promise<Result> {
    const asResult = (order: Order) => new Success(Buffer.from(JSON.stringify(order)), "application/json");
    return executeOnce(this.client, OPERATION, key, { amount, currency },
      async (ctx) => asResult(await this.provider.createOrder(key, amount, currency, ctx.signal)),
      {
        // How a retry after an attempt whose outcome is unknown is protected: this
        // provider does not deduplicate, but finds orders by client reference (its
        // current state, not a cache), so the earlier attempt's order is looked up.
        lookup: async () => {
          const order = await this.provider.findOrder(key);
          return order ? asResult(order) : undefined;
        },
        lease: 1.0,
        attemptDuration: 2.0,
        deadline: 30,
      });
  }
}

async function main(addr: string, token: string, key: string): Promise<void> {
  const provider = new OrderProvider();
  const client = new Client(addr, token);
  try {
    const agent = new Agent(client, provider);
    console.log(`intent: key ${key}, 2500 EUR`);

    provider.answerDelay = 3600; // the first call's answer never comes back
    try {
      await agent.createOrder(key, 2500);
    } catch (error) {
      if (!(error instanceof OutcomeUnknownError)) throw error;
      console.log(`attempt 1: timed out after the provider created an order; outcome unknown (${error.name})`);
    }
    provider.answerDelay = 0;

    const results = await Promise.all(Array.from({ length: 10 }, () => agent.createOrder(key, 2500)));
    const bodies = new Set(results.map((r) => r.body.toString()));
    const recorded = results.filter((r) => !r.replayed).length;
    console.log(`10 concurrent retries: ${bodies.size} distinct result(s): ${results[0]!.body.toString()}`);
    console.log(`  ${recorded} recorded the order found by its client reference, ${10 - recorded} replayed it`);
    console.log(`orders at the provider: ${provider.orders.size}`);
    const again = await agent.createOrder(key, 2500);
    console.log(`a later retry: ${again.replayed ? "replayed" : "recorded"} ${again.body.toString()}`);

    try {
      await agent.createOrder(key, 2600);
    } catch (error) {
      if (!(error instanceof ConflictError)) throw error;
      console.log(`a retry with amount 2600: refused, ${error.reason} (operation ${error.operationId})`);
    }
    console.log(`orders at the provider: ${provider.orders.size}`);
  } finally {
    client.close();
  }
}

const { values } = parseArgs({
  options: {
    addr: { type: "string", default: process.env.IDEMD_ADDR ?? "127.0.0.1:50051" },
    token: { type: "string", default: process.env.IDEMD_TOKEN },
    key: { type: "string", default: `order-${randomUUID()}` },
  },
});
if (!values.token) {
  console.error("orders: --token or IDEMD_TOKEN is required");
  process.exit(2);
}
await main(values.addr!, values.token, values.key!);
