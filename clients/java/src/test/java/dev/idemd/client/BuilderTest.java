package dev.idemd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/** Addresses, tokens and the environment, as every idemd client takes them. */
class BuilderTest {
  @Test
  void addressesAreHostPortOrHttpOrHttps() {
    assertEquals(new Address("127.0.0.1:50051", false), Address.parse("127.0.0.1:50051"));
    assertEquals(
        new Address("idemd.internal:443", false), Address.parse("http://idemd.internal:443"));
    assertEquals(
        new Address("idemd.internal:443", true), Address.parse("https://idemd.internal:443/"));
    assertEquals(new Address("[::1]:50051", false), Address.parse("[::1]:50051"));
    for (String bad :
        new String[] {"", "idemd", "ftp://h:1", "h:port", "https://user@h:1", "h:1/x"}) {
      assertThrows(IllegalArgumentException.class, () -> Address.parse(bad), bad);
    }
  }

  @Test
  void anEmptyTokenIsRefusedAtOnceWithATypedException() {
    EmptyTokenException empty =
        assertThrows(
            EmptyTokenException.class,
            () -> IdemdClient.builder().address("127.0.0.1:1").token("").build());
    assertTrue(empty.getMessage().contains("token is empty"), empty.getMessage());
    EmptyTokenException fromEnv =
        assertThrows(
            EmptyTokenException.class,
            () ->
                IdemdClient.builder()
                    .environment(Map.of("IDEMD_ADDR", "127.0.0.1:1", "IDEMD_TOKEN", ""))
                    .build());
    assertTrue(fromEnv.getMessage().contains("token is empty"), fromEnv.getMessage());
    EmptyTokenException none =
        assertThrows(
            EmptyTokenException.class,
            () -> IdemdClient.builder().environment(Map.of("IDEMD_ADDR", "127.0.0.1:1")).build());
    assertTrue(none.getMessage().contains("IDEMD_TOKEN"), none.getMessage());
    InvalidTokenException newline =
        assertThrows(
            InvalidTokenException.class,
            () -> IdemdClient.builder().address("127.0.0.1:1").token("idem_abc\n").build());
    assertFalse(newline instanceof EmptyTokenException, newline.getMessage());
    // Callers that caught the builder's IllegalArgumentException still do.
    assertTrue(IllegalArgumentException.class.isInstance(empty));
    IllegalArgumentException noAddress =
        assertThrows(
            IllegalArgumentException.class,
            () -> IdemdClient.builder().environment(Map.of("IDEMD_TOKEN", "t")).build());
    assertTrue(noAddress.getMessage().contains("IDEMD_ADDR"), noAddress.getMessage());
  }

  @Test
  void theExplicitOptionsWinOverTheEnvironment() {
    try (IdemdClient client =
        IdemdClient.builder()
            .environment(Map.of("IDEMD_ADDR", "not an address", "IDEMD_TOKEN", ""))
            .address("127.0.0.1:1")
            .token("t")
            .build()) {
      assertEquals(RetryPolicy.DEFAULT, client.retryPolicy());
    }
  }

  @Test
  void everyRpcOfTheServiceHasItsMethod() {
    Set<String> described =
        Rpc.SERVICE.getMethods().stream().map(m -> m.getName()).collect(Collectors.toSet());
    Set<String> bound = Rpc.ALL.stream().map(rpc -> rpc.name).collect(Collectors.toSet());
    assertEquals(described, bound);
    assertEquals("idem.v1.IdempotencyService/Claim", Rpc.CLAIM.method.getFullMethodName());
    assertFalse(bound.isEmpty());
  }
}
