package dev.idemd.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import dev.idemd.idem.v1.ClaimRequest;
import dev.idemd.idem.v1.FailResponse;
import dev.idemd.idem.v1.OperationState;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.MethodDescriptor;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The migration window's local half, without a server: previous fingerprints the server would
 * refuse are refused before any RPC, and a selector's fingerprint is the server's fingerprint of
 * the document it selects (so a previous selector's fingerprint matches what the old version's
 * Claim stored).
 */
class PreviousFingerprintsTest {
  /** Counts the RPCs the client starts, whether or not anything answers. */
  final AtomicInteger calls = new AtomicInteger();

  final List<String> effects = new ArrayList<>();
  ManagedChannel channel;
  IdemdClient client;

  @BeforeEach
  void connectToAClosedPort() throws IOException {
    int closed;
    try (ServerSocket socket = new ServerSocket(0)) {
      closed = socket.getLocalPort();
    }
    ClientInterceptor counting =
        new ClientInterceptor() {
          @Override
          public <Q, R> ClientCall<Q, R> interceptCall(
              MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
            calls.incrementAndGet();
            return next.newCall(method, options);
          }
        };
    channel =
        ManagedChannelBuilder.forAddress("127.0.0.1", closed)
            .usePlaintext()
            .intercept(counting)
            .build();
    client = IdemdClient.builder().channel(channel).token("idem_test").build();
  }

  @AfterEach
  void close() {
    client.close();
    channel.shutdownNow();
  }

  Effect counting() {
    return ctx -> {
      effects.add(ctx.operationId());
      return Outcome.success(new byte[0], "");
    };
  }

  InvalidArgumentException refused(ExecuteOptions options) {
    return assertThrows(
        InvalidArgumentException.class,
        () -> client.executeOnce("payments.charge", "k", Payload.json("{}"), options, counting()));
  }

  static List<String> fields(IdemdStatusException error) {
    return error.violations().stream()
        .map(IdemdStatusException.FieldViolation::field)
        .collect(java.util.stream.Collectors.toList());
  }

  @Test
  void fivePreviousFingerprintsAreRefusedBeforeAnyRpc() {
    byte[][] five = new byte[5][32];
    InvalidArgumentException error =
        refused(ExecuteOptions.builder().previousFingerprints(five).build());
    assertEquals(List.of("previous_fingerprints"), fields(error));
    assertEquals("INVALID_REQUEST", error.reason().orElseThrow());
    assertEquals(0, calls.get());
    assertTrue(effects.isEmpty());
  }

  @Test
  void aPreviousFingerprintThatIsNot32BytesIsRefusedByIndexBeforeAnyRpc() {
    InvalidArgumentException error =
        refused(ExecuteOptions.builder().previousFingerprints(new byte[32], new byte[31]).build());
    assertEquals(List.of("previous_fingerprints[1]"), fields(error));
    assertTrue(error.getMessage().contains("not 31"), error.getMessage());
    assertEquals(0, calls.get());
    // The asynchronous form checks them too, before any RPC, and fails its future.
    java.util.concurrent.CompletableFuture<OperationResult> refused =
        client.executeOnceAsync(
            "payments.charge",
            "k",
            Payload.json("{}"),
            ExecuteOptions.builder().previousFingerprints(new byte[33]).build(),
            ctx ->
                java.util.concurrent.CompletableFuture.completedFuture(Outcome.unknown("x", "y")));
    java.util.concurrent.ExecutionException failed =
        assertThrows(java.util.concurrent.ExecutionException.class, refused::get);
    assertTrue(failed.getCause() instanceof InvalidArgumentException, failed.toString());
    assertEquals(0, calls.get());
    assertTrue(effects.isEmpty());
  }

  @Test
  void fourOf32BytesAreSentAndTheCallReachesTheChannel() {
    // The counterpart of the refusals: valid ones pass the check and a Claim is attempted (to a
    // closed port, so it fails as unavailable, not as an invalid argument).
    byte[][] four = new byte[4][32];
    Exception unreachable =
        assertThrows(
            Exception.class,
            () ->
                client.executeOnce(
                    "payments.charge",
                    "k",
                    Payload.json("{}"),
                    ExecuteOptions.builder()
                        .previousFingerprints(four)
                        .deadline(java.time.Duration.ZERO)
                        .build(),
                    counting()));
    assertTrue(
        unreachable instanceof UnavailableException
            || unreachable instanceof DeadlineExceededException,
        unreachable.toString());
    assertTrue(calls.get() >= 1);
  }

  @Test
  void everyClaimOfTheCallCarriesThem() {
    // The protocol's pure core, as ProtocolTest drives it: the first Claim, and the Claim of the
    // next attempt after a retryable failure.
    byte[] old = Fingerprints.json("{\"amount\":100}");
    long[] now = {0};
    ExecuteOnceProtocol protocol =
        new ExecuteOnceProtocol(
            "payments.charge",
            "k",
            Payload.json("{\"amount\":100,\"currency\":\"EUR\"}"),
            ExecuteOptions.builder().previousFingerprints(old).build(),
            () -> now[0],
            () -> new byte[] {1});
    ClaimRequest first = ProtocolTest.sent(protocol.start(), ClaimRequest.class);
    assertEquals(List.of(ByteString.copyFrom(old)), first.getPreviousFingerprintsList());
    protocol.next(new Answer.Replied(ProtocolTest.acquired(1), now[0]));
    protocol.next(Answer.DONE);
    protocol.next(
        new Answer.Returned(Outcome.retryable("busy", "", java.time.Duration.ofMillis(10))));
    protocol.next(
        new Answer.Replied(
            FailResponse.newBuilder().setState(OperationState.OPERATION_STATE_RETRY_WAIT).build(),
            now[0]));
    ClaimRequest second = ProtocolTest.sent(protocol.next(Answer.DONE), ClaimRequest.class);
    assertEquals(List.of(ByteString.copyFrom(old)), second.getPreviousFingerprintsList());
    assertEquals(
        0,
        ProtocolTest.sent(protocol(ExecuteOptions.defaults()).start(), ClaimRequest.class)
            .getPreviousFingerprintsCount(),
        "outside a window a Claim carries none");
  }

  ExecuteOnceProtocol protocol(ExecuteOptions options) {
    return new ExecuteOnceProtocol(
        "payments.charge", "k", Payload.json("{}"), options, () -> 0L, () -> new byte[] {1});
  }

  @Test
  void theOptionsKeepCopiesAndToBuilderKeepsThem() {
    byte[] given = new byte[32];
    given[0] = 7;
    ExecuteOptions options = ExecuteOptions.builder().previousFingerprints(given).build();
    given[0] = 8;
    assertEquals(7, options.previousFingerprints().get(0)[0]);
    options.previousFingerprints().get(0)[0] = 9;
    assertEquals(7, options.previousFingerprints().get(0)[0]);
    ExecuteOptions derived = options.toBuilder().lease(java.time.Duration.ofSeconds(3)).build();
    assertArrayEquals(options.previousFingerprints().get(0), derived.previousFingerprints().get(0));
    assertTrue(ExecuteOptions.defaults().previousFingerprints().isEmpty());
    assertThrows(
        NullPointerException.class,
        () -> ExecuteOptions.builder().previousFingerprints(new byte[32], null));
  }

  /**
   * For every shared selector vector: the selector's fingerprint is the server's fingerprint of the
   * selected canonical document (json mode, as a Claim with that document as its json_payload is
   * fingerprinted), and both are the vector's expected fingerprint.
   */
  @Test
  void aSelectorsFingerprintIsTheServersFingerprintOfTheSelectedDocument() throws IOException {
    Map<?, ?> file =
        (Map<?, ?>)
            Json.parse(Files.readString(SelectorTest.SHARED_VECTORS, StandardCharsets.UTF_8));
    int checked = 0;
    for (Object entry : (List<?>) file.get("vectors")) {
      Map<?, ?> vector = (Map<?, ?>) entry;
      if (vector.get("refused_at") != null) {
        continue;
      }
      String name = (String) vector.get("name");
      Map<?, ?> fields = (Map<?, ?>) vector.get("selector");
      Function<String, List<String>> list =
          field -> {
            List<String> out = new ArrayList<>();
            if (fields.get(field) != null) {
              ((List<?>) fields.get(field)).forEach(item -> out.add((String) item));
            }
            return out;
          };
      Selector selector =
          Selector.builder()
              .include(list.apply("include"))
              .exclude(list.apply("exclude"))
              .headers(list.apply("headers"))
              .build();
      List<Map.Entry<String, String>> headers = new ArrayList<>();
      if (vector.get("headers") != null) {
        for (Object pair : (List<?>) vector.get("headers")) {
          List<?> nameValue = (List<?>) pair;
          headers.add(Map.entry((String) nameValue.get(0), (String) nameValue.get(1)));
        }
      }
      String body = (String) vector.get("body");
      String expected = (String) vector.get("fingerprint");
      String canonical = (String) vector.get("canonical");
      assertEquals(expected, hex(Fingerprints.json(canonical)), name + ": the server's");
      assertEquals(expected, hex(selector.fingerprint(body, headers)), name + ": the selector's");
      if (headers.isEmpty()) {
        assertEquals(expected, hex(selector.fingerprint(body)), name + ": without headers");
      }
      checked++;
    }
    assertTrue(checked >= 25, "vectors checked: " + checked);
  }

  static String hex(byte[] bytes) {
    return HexFormat.of().formatHex(bytes);
  }
}
