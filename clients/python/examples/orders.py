"""An agent creates an order at most once through idemd, although its first attempt
times out after the provider created the order and it then retries ten times at once.

    cargo run --release -- serve --dev                      # in another terminal
    IDEMD_ADDR=127.0.0.1:50051 IDEMD_TOKEN=$(cat idemd-data/dev-token) \
        python clients/python/examples/orders.py

The provider (simulated here) creates an order per call (it does not deduplicate)
and supports lookup by client reference: the agent's idempotency key, so the agent
passes a ``lookup``. The first attempt's call creates the order but its answer never comes
back; the attempt is cancelled at its deadline and reported UNKNOWN. Ten concurrent
retries of the same intent follow: one owns the next attempt, is told an earlier
attempt may have taken effect (ReconcileFirst), finds the order by its reference and
records it; the others wait and get that record replayed. A retry with a changed amount
is refused as a conflict.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import uuid
from dataclasses import dataclass, field

import idemd
from idemd import EffectContext, Success

OPERATION = "orders.create"


@dataclass
class OrderProvider:
    """An order API that creates an order per call and finds orders by client reference."""

    orders: dict[str, dict[str, object]] = field(default_factory=dict)
    answer_delay: float = 0.0
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    async def create_order(self, client_reference: str, amount: int, currency: str) -> dict[str, object]:
        order = {"order_id": f"ord_{next(self.ids)}", "amount": amount, "currency": currency}
        self.orders[client_reference] = order  # the order exists from here on
        await asyncio.sleep(self.answer_delay)  # ... and the answer may be slow
        return order

    async def find_order(self, client_reference: str) -> dict[str, object] | None:
        return self.orders.get(client_reference)


class Agent:
    def __init__(self, client: idemd.Client, provider: OrderProvider) -> None:
        self.client = client
        self.provider = provider

    async def create_order(self, key: str, amount: int, currency: str = "EUR") -> idemd.Result:
        intent = {"amount": amount, "currency": currency}

        async def create(ctx: EffectContext) -> Success:
            order = await self.provider.create_order(key, amount, currency)
            return Success(json.dumps(order).encode(), "application/json")

        # Asked when an earlier attempt may have created the order (ReconcileFirst). It
        # reads the provider's current state (never a cache or a lagging replica): an
        # order it finds is recorded; "none" counts only from a lookup that started
        # once the earlier attempt can no longer create one.
        async def look_up(ctx: EffectContext) -> Success | None:
            order = await self.provider.find_order(key)
            return Success(json.dumps(order).encode(), "application/json") if order else None

        # The order API does not deduplicate creations, so the call site passes a
        # lookup; without one (or provider_deduplicates=True for an API that honours
        # an idempotency key) a retry after an unknown outcome would never create.
        return await idemd.execute_once(
            self.client, OPERATION, key, intent, create,
            lookup=look_up, lease=1.0, attempt_duration=2.0, deadline=30,
        )


async def main(addr: str | None, token: str | None, key: str) -> None:
    provider = OrderProvider()
    async with idemd.Client(addr, token) as client:
        agent = Agent(client, provider)
        print(f"intent: key {key}, 2500 EUR")

        provider.answer_delay = 3600  # the first call's answer never comes back
        try:
            await agent.create_order(key, 2500)
        except idemd.OutcomeUnknownError as unknown:
            print("attempt 1: timed out after the provider created an order; "
                  f"outcome unknown ({type(unknown).__name__})")
        provider.answer_delay = 0.0

        results = await asyncio.gather(*(agent.create_order(key, 2500) for _ in range(10)))
        bodies = {result.body for result in results}
        recorded = sum(not result.replayed for result in results)
        print(f"10 concurrent retries: {len(bodies)} distinct result(s): {results[0].body.decode()}")
        print(f"  {recorded} recorded the order found by its client reference, {10 - recorded} replayed it")
        print(f"orders at the provider: {len(provider.orders)}")
        again = await agent.create_order(key, 2500)
        print(f"a later retry: {'replayed' if again.replayed else 'recorded'} {again.body.decode()}")

        try:
            await agent.create_order(key, 2600)
        except idemd.ConflictError as conflict:
            print(f"a retry with amount 2600: refused, {conflict.reason} (operation {conflict.operation_id})")
        print(f"orders at the provider: {len(provider.orders)}")


if __name__ == "__main__":
    flags = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    flags.add_argument("--addr", help="host:port or http(s)://host:port (default: IDEMD_ADDR)")
    flags.add_argument("--token", help="the tenant's bearer token (default: IDEMD_TOKEN)")
    flags.add_argument("--key", default=f"order-{uuid.uuid4()}",
                       help="the idempotency key (made once per intent; random by default)")
    args = flags.parse_args()
    try:
        asyncio.run(main(args.addr, args.token, args.key))
    except idemd.ConfigurationError as refused:
        flags.error(str(refused))
