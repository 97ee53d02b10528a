package dev.idemd.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Request selectors: every shared vector in testdata/selectors.json (docs/api.md). */
class SelectorTest {
  static final Path SHARED_VECTORS = TestServer.repository().resolve("testdata/selectors.json");

  private static List<String> strings(Object list) {
    List<String> out = new ArrayList<>();
    if (list != null) {
      for (Object item : (List<?>) list) {
        out.add((String) item);
      }
    }
    return out;
  }

  private static Selector selector(Map<?, ?> fields) {
    return Selector.builder()
        .include(strings(fields.get("include")))
        .exclude(strings(fields.get("exclude")))
        .headers(strings(fields.get("headers")))
        .build();
  }

  @Test
  void everySharedSelectorVector() throws IOException {
    Map<?, ?> file =
        (Map<?, ?>) Json.parse(Files.readString(SHARED_VECTORS, StandardCharsets.UTF_8));
    List<?> vectors = (List<?>) file.get("vectors");
    assertTrue(vectors.size() >= 40, "the shared vectors: " + vectors.size());
    int refusedSelectors = 0;
    int refusedBodies = 0;
    for (Object entry : vectors) {
      Map<?, ?> vector = (Map<?, ?>) entry;
      String name = (String) vector.get("name");
      Map<?, ?> fields = (Map<?, ?>) vector.get("selector");
      String body = (String) vector.get("body");
      List<Map.Entry<String, String>> headers = new ArrayList<>();
      if (vector.get("headers") != null) {
        for (Object pair : (List<?>) vector.get("headers")) {
          List<String> nameValue = strings(pair);
          headers.add(Map.entry(nameValue.get(0), nameValue.get(1)));
        }
      }
      Object refusedAt = vector.get("refused_at");
      if ("selector".equals(refusedAt)) {
        refusedSelectors++;
        assertThrows(IllegalArgumentException.class, () -> selector(fields), name);
        continue;
      }
      Selector selector = selector(fields);
      if ("request".equals(refusedAt)) {
        refusedBodies++;
        assertThrows(InvalidArgumentException.class, () -> selector.canonical(body, headers), name);
        continue;
      }
      assertEquals(vector.get("canonical"), selector.canonical(body, headers), name);
      assertEquals(
          vector.get("fingerprint"),
          HexFormat.of()
              .formatHex(selector.fingerprint(body.getBytes(StandardCharsets.UTF_8), headers)),
          name);
    }
    assertTrue(refusedSelectors >= 10 && refusedBodies >= 5, "refusals");
  }

  @Test
  void theEmptySelectorIsTodaysFingerprint() {
    String body = "{\"currency\":\"EUR\",\"amount\":1000}";
    Selector empty = Selector.builder().build();
    assertTrue(empty.isEmpty());
    assertArrayEquals(Fingerprints.json(body), empty.fingerprint(body, List.of()));
  }
}
