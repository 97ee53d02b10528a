package dev.idemd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The fingerprint function, identical to the server's (README "Fingerprints"). */
class FingerprintsTest {
  static final Path SHARED_VECTORS = TestServer.repository().resolve("testdata/fingerprints.json");

  static String hex(byte[] bytes) {
    return HexFormat.of().formatHex(bytes);
  }

  @Test
  void everySharedVectorInTestdata() throws IOException {
    Map<?, ?> file =
        (Map<?, ?>) Json.parse(Files.readString(SHARED_VECTORS, StandardCharsets.UTF_8));
    List<?> vectors = (List<?>) file.get("vectors");
    assertTrue(vectors.size() >= 60, "the shared vectors: " + vectors.size());
    int refused = 0;
    for (Object entry : vectors) {
      Map<?, ?> vector = (Map<?, ?>) entry;
      String name = (String) vector.get("name");
      String mode = (String) vector.get("mode");
      if (mode.equals("bytes")) {
        byte[] payload = HexFormat.of().parseHex((String) vector.get("input_hex"));
        assertEquals(vector.get("fingerprint"), hex(Fingerprints.bytes(payload)), name);
        continue;
      }
      String input = (String) vector.get("input");
      if (vector.containsKey("refused")) {
        refused++;
        assertThrows(NotIJsonException.class, () -> Fingerprints.json(input), name);
        continue;
      }
      assertEquals(vector.get("canonical"), Fingerprints.canonicalJson(input), name);
      assertEquals(vector.get("fingerprint"), hex(Fingerprints.json(input)), name);
      assertEquals(
          vector.get("fingerprint"),
          hex(Fingerprints.json(input.getBytes(StandardCharsets.UTF_8))),
          name);
    }
    assertTrue(refused >= 20, "refused vectors: " + refused);
  }

  @Test
  void theReadmeVectors() {
    assertEquals(
        "b1b2b87aead43d01e114b4767c954105984d07bacaad3c276b7fd8c0bf6ea63a",
        hex(Fingerprints.json("{ \"currency\" : \"EUR\",\n \"amount\": 1000 }")));
    assertEquals(
        "94d0eb7fa404bbd41180fb4f0890630b7d516de1603730ecb60dc2e5e9dd1e55",
        hex(Fingerprints.bytes("hello".getBytes(StandardCharsets.UTF_8))));
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "[1e-7, 1.5e-7, 0.000001, 123456789012345.6, -0.0, -0,"
            + " 5e-324]|[1e-7,1.5e-7,0.000001,123456789012345.6,0,0,5e-324]",
        "{\"amount\":1e2,\"rate\":1.5e-3}|{\"amount\":100,\"rate\":0.0015}",
        "[123e-20, 2.82879384806159e-17, 9007199254740.99, 1e-6,"
            + " 1e-7]|[1.23e-18,2.82879384806159e-17,9007199254740.99,0.000001,1e-7]",
        "[0.1, 0.2, 0.30000000000000004, 4.35, 2e-3,"
            + " 5e-7]|[0.1,0.2,0.30000000000000004,4.35,0.002,5e-7]"
      })
  void numbersAreWrittenAsEcmaScriptWritesThem(String pair) {
    String[] parts = pair.split("\\|");
    assertEquals(parts[1], Fingerprints.canonicalJson(parts[0]));
  }

  @Test
  void invalidUtf8IsRefused() {
    assertThrows(
        NotIJsonException.class, () -> Fingerprints.json(new byte[] {'"', (byte) 0xc3, '"'}));
  }
}
