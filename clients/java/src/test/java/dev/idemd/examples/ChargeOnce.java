package dev.idemd.examples;

import dev.idemd.client.ExecuteOptions;
import dev.idemd.client.IdemdClient;
import dev.idemd.client.OperationResult;
import dev.idemd.client.Outcome;
import dev.idemd.client.Payload;
import java.nio.charset.StandardCharsets;

public final class ChargeOnce {
  public static void main(String[] args) throws Exception {
    try (IdemdClient client = IdemdClient.builder().build()) { // IDEMD_ADDR, IDEMD_TOKEN
      OperationResult result =
          client.executeOnce(
              "payments.charge",
              "order-1001",
              Payload.json("{\"amount\":1000,\"currency\":\"EUR\"}"),
              // After an attempt whose outcome is unknown, the effect runs again: safe only
              // because the provider honours ctx.operationId() as its idempotency key. A
              // provider that does not: pass a lookup instead (README, "After an unknown
              // outcome").
              ExecuteOptions.builder().providerDeduplicates(true).build(),
              ctx -> {
                // Call the provider here, with ctx.operationId() as its idempotency key and
                // ctx.remaining() as its timeout.
                byte[] charge = "{\"charge\":\"ch_1\"}".getBytes(StandardCharsets.UTF_8);
                return Outcome.success(charge, "application/json");
              });
      System.out.println(result.bodyText() + (result.replayed() ? " (replayed)" : " (charged)"));
    }
  }
}
