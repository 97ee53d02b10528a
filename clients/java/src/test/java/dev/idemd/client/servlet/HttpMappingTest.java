package dev.idemd.client.servlet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.HexFormat;
import org.junit.jupiter.api.Test;

/** The HTTP mapping's pure parts, as every idemd middleware computes them. */
class HttpMappingTest {
  @Test
  void theScopedKeyIsTheDocumentedFormula() throws Exception {
    String expected =
        HexFormat.of()
            .formatHex(
                MessageDigest.getInstance("SHA-256")
                    .digest("Bearer alice".getBytes(StandardCharsets.UTF_8)))
            .substring(0, 32);
    assertEquals("9d7cce461e4b2f090a3d686b4ae72d25", expected); // the vector every client pins
    assertEquals(
        "9d7cce461e4b2f090a3d686b4ae72d25:order-1",
        IdempotencyFilter.scopedKey("Bearer alice", "order-1"));
  }

  @Test
  void keyAndOperationForms() {
    assertEquals(
        "8e03978e-40d5-43e8-bc93-6894a57f9324",
        HttpMapping.parseKey("\"8e03978e-40d5-43e8-bc93-6894a57f9324\""));
    assertEquals("a\"b", HttpMapping.parseKey("\"a\\\"b\""));
    assertEquals("bare", HttpMapping.parseKey(" bare "));
    assertEquals("http.post/orders/_x__y", HttpMapping.operationName("POST", "/orders/{x} y"));
    assertEquals(128, HttpMapping.operationName("POST", "/" + "a".repeat(300)).length());
  }

  @Test
  void problemBodiesAreThoseOfThePythonMiddleware() {
    HttpMapping.Response missing = HttpMapping.MISSING_KEY;
    assertEquals(400, missing.status());
    assertEquals(
        "{\"type\": \"about:blank\", \"title\": \"Idempotency-Key missing\", \"status\": 400,"
            + " \"detail\": \"this request requires an Idempotency-Key header\"}",
        new String(missing.body(), StandardCharsets.UTF_8));
    HttpMapping.Response busy = HttpMapping.problem(409, "t", "d", 0.2);
    assertTrue(busy.headers().contains(java.util.Map.entry("retry-after", "1")));
    assertEquals("\"caf\\u00e9 \\\"x\\\"\"", HttpMapping.jsonString("café \"x\""));
  }

  @Test
  void aRefusalStatusOutsideTheErrorsIsRefusedWhenTheFilterIsBuilt() {
    // The client supplier is only called at the first request: no idemd is needed here.
    java.util.function.Supplier<IdempotencyFilter.Builder> builder =
        () -> IdempotencyFilter.builder().client(() -> null);
    for (int bad : new int[] {0, 200, 302, 399, 600, 4220, -409}) {
      IllegalArgumentException conflict =
          assertThrows(
              IllegalArgumentException.class, () -> builder.get().conflictStatus(bad).build());
      assertTrue(conflict.getMessage().contains("conflictStatus"), conflict.getMessage());
      assertTrue(conflict.getMessage().contains("400..599"), conflict.getMessage());
      IllegalArgumentException inProgress =
          assertThrows(
              IllegalArgumentException.class, () -> builder.get().inProgressStatus(bad).build());
      assertTrue(inProgress.getMessage().contains("inProgressStatus"), inProgress.getMessage());
      assertTrue(inProgress.getMessage().contains("400..599"), inProgress.getMessage());
    }
    for (int good : new int[] {400, 409, 422, 429, 599}) {
      builder.get().conflictStatus(good).inProgressStatus(good).build();
    }
  }

  @Test
  void theRequestIdentityIsFramedAsTheOtherMiddlewaresFrameIt() {
    // Python: json.dumps([method, path, query, content_type], separators=(",", ":")) + "\n" + body
    assertEquals(
        "[\"POST\",\"/orders\",\"a=1\",\"application/json\"]\n{}",
        new String(
            HttpMapping.framed(
                "post",
                "/orders",
                "a=1",
                "application/json",
                "{}".getBytes(StandardCharsets.UTF_8)),
            StandardCharsets.UTF_8));
    assertEquals(
        "[\"POST\",\"/\",\"\",\"text/plain; charset=\\u00e9\"]\n",
        new String(
            HttpMapping.framed("POST", "", "", "text/plain; charset=\u00e9", new byte[0]),
            StandardCharsets.UTF_8));
  }
}
