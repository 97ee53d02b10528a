package dev.idemd.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.google.protobuf.ByteString;
import com.google.protobuf.Message;
import dev.idemd.idem.v1.Acquired;
import dev.idemd.idem.v1.ClaimRequest;
import dev.idemd.idem.v1.ClaimResponse;
import dev.idemd.idem.v1.CompleteRequest;
import dev.idemd.idem.v1.CompleteResponse;
import dev.idemd.idem.v1.Completed;
import dev.idemd.idem.v1.FailRequest;
import dev.idemd.idem.v1.FailResponse;
import dev.idemd.idem.v1.FailureReason;
import dev.idemd.idem.v1.LookupResponse;
import dev.idemd.idem.v1.NeedsReconciliation;
import dev.idemd.idem.v1.Operation;
import dev.idemd.idem.v1.OperationError;
import dev.idemd.idem.v1.OperationState;
import dev.idemd.idem.v1.Ownership;
import dev.idemd.idem.v1.Pending;
import dev.idemd.idem.v1.PendingReason;
import dev.idemd.idem.v1.ReconcileFirst;
import dev.idemd.idem.v1.RenewRequest;
import dev.idemd.idem.v1.RenewResponse;
import io.grpc.Status;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.opentest4j.AssertionFailedError;

/**
 * The shared protocol vectors ({@code testdata/protocol/vectors.json}, described in its README)
 * driving {@link ExecuteOnceProtocol} and {@link Renewals} step by step, without a server. Each
 * step the protocol takes (a send, the effect, a provider lookup) must be the vector's next step,
 * and is answered as the vector says; the clock moves only by what the vector says each step takes.
 * Sends go through the client's own re-send decisions ({@link RetryPlan}, with no jitter).
 * Background renewals run while a guarded step takes its time, from the attempt's first guarded
 * step on.
 */
class ProtocolVectorsTest {
  static final Path VECTORS = TestServer.repository().resolve("testdata/protocol/vectors.json");

  /** The clock at the call's start; the vectors count from there. */
  static final long ORIGIN = 1_000_000_000_000L;

  static final long MICROSECOND = 1_000L;

  /**
   * Where this client knowingly decides otherwise than the vectors (and docs/client-protocol.md),
   * and why. Each is checked to still fail, so that one fixed (or settled the other way in the
   * vectors) is taken off this list.
   */
  static final Map<String, String> KNOWN_DIFFERENCES = Map.of();

  @TestFactory
  Stream<DynamicTest> everySharedProtocolVector() throws IOException {
    Map<?, ?> file = (Map<?, ?>) Json.parse(Files.readString(VECTORS, StandardCharsets.UTF_8));
    List<?> scenarios = (List<?>) file.get("scenarios");
    assertFalse(scenarios.isEmpty());
    List<String> names = scenarios.stream().map(entry -> (String) map(entry).get("name")).toList();
    assertTrue(names.containsAll(KNOWN_DIFFERENCES.keySet()), "a known difference names no vector");
    return scenarios.stream()
        .map(entry -> (Map<?, ?>) entry)
        .map(
            scenario -> {
              String name = (String) scenario.get("name");
              if (!KNOWN_DIFFERENCES.containsKey(name)) {
                return DynamicTest.dynamicTest(name, () -> new World(scenario).check());
              }
              return DynamicTest.dynamicTest(
                  name + " (a known difference)",
                  () ->
                      assertThrows(
                          AssertionFailedError.class,
                          () -> new World(scenario).check(),
                          "this client now passes: take it off KNOWN_DIFFERENCES"));
            });
  }

  static long nanos(Object seconds) {
    return new BigDecimal(((Json.Number) seconds).canonical())
        .multiply(BigDecimal.valueOf(1_000_000_000L))
        .setScale(0, java.math.RoundingMode.HALF_EVEN)
        .longValueExact();
  }

  static com.google.protobuf.Duration duration(Object seconds) {
    return IdemdClient.Durations.ofNanos(nanos(seconds));
  }

  static int integer(Object number) {
    return Integer.parseInt(((Json.Number) number).canonical());
  }

  static Map<?, ?> map(Object value) {
    return (Map<?, ?>) value;
  }

  /** The scripted server, provider and clock of one scenario. */
  static final class World {
    final String name;
    final Map<?, ?> call;
    final List<Map<?, ?>> steps = new ArrayList<>();
    int taken;
    long now = ORIGIN;
    final List<byte[]> tokens = new ArrayList<>();
    final Map<Integer, ByteString> firstSends = new HashMap<>();
    final long lease;
    final long attemptDuration;

    Attempt attempt;
    Renewals renewals;
    boolean renewalsStarted;
    boolean renewalsParked;
    long renewalsWakeAt;

    World(Map<?, ?> scenario) {
      name = (String) scenario.get("name");
      call = scenario.containsKey("call") ? map(scenario.get("call")) : Map.of();
      for (Object step : (List<?>) scenario.get("steps")) {
        steps.add(map(step));
      }
      lease = call.containsKey("lease") ? nanos(call.get("lease")) : 30_000_000_000L;
      attemptDuration =
          call.containsKey("attempt_duration")
              ? nanos(call.get("attempt_duration"))
              : 300_000_000_000L;
    }

    ExecuteOptions options() {
      ExecuteOptions.Builder options =
          ExecuteOptions.builder()
              .lease(Duration.ofNanos(lease))
              .attemptDuration(Duration.ofNanos(attemptDuration));
      if (call.containsKey("deadline")) {
        options.deadline(Duration.ofNanos(nanos(call.get("deadline"))));
      }
      if (call.containsKey("lookup_interval")) {
        options.lookupInterval(Duration.ofNanos(nanos(call.get("lookup_interval"))));
      }
      if (Boolean.TRUE.equals(call.get("lookup"))) {
        // Never called: the scripted driver answers the lookup steps.
        options.lookup(context -> null);
      }
      if (Boolean.TRUE.equals(call.get("provider_deduplicates"))) {
        options.providerDeduplicates(true);
      }
      return options.build();
    }

    String where() {
      return "'" + name + "', step " + (taken + 1);
    }

    Map<?, ?> expect(String action) {
      assertFalse(
          steps.isEmpty() || !steps.get(0).containsKey("do"),
          where() + ": the client does " + action + ", the vector expects the call to end");
      Map<?, ?> step = steps.get(0);
      assertEquals(step.get("do"), action, where() + ": the client does " + action);
      if (step.containsKey("at")) {
        long at = now - ORIGIN;
        assertTrue(
            Math.abs(at - nanos(step.get("at"))) <= MICROSECOND,
            where() + ": " + action + " at " + at + " ns, the vector says " + step.get("at"));
      }
      steps.remove(0);
      taken++;
      return step;
    }

    long takes(Map<?, ?> step) {
      return step.containsKey("takes") ? nanos(step.get("takes")) : 0;
    }

    // ---- sends -------------------------------------------------------------------------

    static IdemdStatusException scriptedError(String name, Object retryAfter) {
      Status.Code code;
      String reason = name;
      switch (name) {
        case "UNAVAILABLE" -> {
          code = Status.Code.UNAVAILABLE;
          reason = null;
        }
        case "LOST_REPLY" -> {
          code = Status.Code.DEADLINE_EXCEEDED;
          reason = null;
        }
        case "LEASE_LOST" -> code = Status.Code.ABORTED;
        case "INVALID_REQUEST" -> code = Status.Code.INVALID_ARGUMENT;
        default -> code = Status.Code.FAILED_PRECONDITION;
      }
      Duration delay = retryAfter == null ? null : Duration.ofNanos(nanos(retryAfter));
      return new StatusDetails(code, "scripted " + name, reason, Map.of(), delay, List.of(), null)
          .toException();
    }

    /** One send step of the protocol, re-sent as the client's RetryPlan decides. */
    Answer send(Step.Send<?, ?> send) {
      RetryPlan plan =
          new RetryPlan(
              RetryPolicy.DEFAULT,
              send.deadline(),
              send.extraTimeoutNanos(),
              () -> now,
              ceiling -> 0);
      while (true) {
        try {
          plan.nextTimeoutNanos();
        } catch (IdemdStatusException noTimeLeft) {
          return new Answer.Refused(noTimeLeft);
        }
        Map<?, ?> step = expect(action(send.rpc()));
        Message response = answer(send.request(), step);
        now += takes(step);
        if (!step.containsKey("error")) {
          return new Answer.Replied(response, plan.sentAt());
        }
        try {
          now +=
              plan.delayAfter(scriptedError((String) step.get("error"), step.get("retry_after")));
        } catch (IdemdStatusException refused) {
          return new Answer.Refused(refused);
        }
      }
    }

    static String action(Rpc<?, ?> rpc) {
      if (rpc == Rpc.CLAIM) {
        return "claim";
      }
      if (rpc == Rpc.RENEW) {
        return "renew";
      }
      if (rpc == Rpc.COMPLETE) {
        return "complete";
      }
      if (rpc == Rpc.FAIL) {
        return "fail";
      }
      if (rpc == Rpc.LOOKUP) {
        return "lookup";
      }
      throw new AssertionError("the protocol sends " + rpc);
    }

    /** Checks the request against the step, and builds the step's answer (null: an error). */
    Message answer(Message request, Map<?, ?> step) {
      Map<?, ?> answer = step.containsKey("answer") ? map(step.get("answer")) : null;
      if (request instanceof ClaimRequest claim) {
        int number = 0;
        for (int i = 0; i < tokens.size(); i++) {
          if (ByteString.copyFrom(tokens.get(i)).equals(claim.getClaimToken())) {
            number = i + 1;
          }
        }
        assertEquals(integer(step.get("token")), number, where() + ": the Claim's token");
        ByteString sent = claim.toByteString();
        assertEquals(
            firstSends.computeIfAbsent(number, n -> sent), sent, where() + ": a re-sent Claim");
        if (step.containsKey("wait")) {
          assertTrue(claim.hasWait(), where() + ": a Claim without wait");
          assertTrue(
              Math.abs(IdemdClient.Durations.toNanos(claim.getWait()) - nanos(step.get("wait")))
                  <= MICROSECOND,
              where() + ": a Claim with wait " + claim.getWait());
        } else {
          assertFalse(claim.hasWait(), where() + ": a Claim with wait " + claim.getWait());
        }
        assertEquals(lease, IdemdClient.Durations.toNanos(claim.getLease()));
        assertEquals(attemptDuration, IdemdClient.Durations.toNanos(claim.getMaxAttemptDuration()));
        return answer == null ? null : claimResponse(answer);
      }
      if (request instanceof RenewRequest renew) {
        assertNotNull(attempt, where() + ": a Renew outside an attempt");
        assertEquals(attempt.fence, renew.getFence(), where() + ": the Renew's fence");
        assertEquals(lease, IdemdClient.Durations.toNanos(renew.getLease()), where());
        return answer == null
            ? null
            : RenewResponse.newBuilder()
                .setLease(duration(answer.get("lease")))
                .setAttemptDeadline(duration(answer.get("attempt_deadline")))
                .build();
      }
      if (request instanceof CompleteRequest complete) {
        assertEquals(
            step.get("body"),
            complete.getResult().getBody().toStringUtf8(),
            where() + ": the Complete's body");
        return CompleteResponse.newBuilder()
            .setState(OperationState.OPERATION_STATE_SUCCEEDED)
            .build();
      }
      if (request instanceof FailRequest failRequest) {
        assertEquals(
            "FAIL_DISPOSITION_" + step.get("disposition"),
            failRequest.getDisposition().name(),
            where() + ": the Fail's disposition");
        if (step.containsKey("code")) {
          assertEquals(step.get("code"), failRequest.getError().getCode(), where());
        }
        if (step.containsKey("retry_after")) {
          assertEquals(
              nanos(step.get("retry_after")),
              IdemdClient.Durations.toNanos(failRequest.getRetryAfter()),
              where());
        } else {
          assertFalse(failRequest.hasRetryAfter(), where() + ": a Fail with retry_after");
        }
        if (answer == null) {
          return null;
        }
        FailResponse.Builder response =
            FailResponse.newBuilder()
                .setState(OperationState.valueOf("OPERATION_STATE_" + answer.get("state")));
        if (answer.containsKey("reason")) {
          response.setReason(FailureReason.valueOf("FAILURE_REASON_" + answer.get("reason")));
        }
        if (answer.containsKey("retry_after")) {
          response.setRetryAfter(duration(answer.get("retry_after")));
        }
        return response.build();
      }
      assertNotNull(answer, where() + ": a Lookup answered with an error");
      Operation.Builder operation =
          Operation.newBuilder()
              .setOperationId("op-1")
              .setState(OperationState.valueOf("OPERATION_STATE_" + answer.get("state")))
              .setAttempt(integer(answer.get("attempt")));
      if (answer.containsKey("body")) {
        operation.setResult(
            dev.idemd.idem.v1.Result.newBuilder()
                .setBody(ByteString.copyFromUtf8((String) answer.get("body"))));
      }
      if (answer.containsKey("error")) {
        operation.setError(
            OperationError.newBuilder()
                .setCode((String) answer.get("error"))
                .setReason(FailureReason.valueOf("FAILURE_REASON_" + answer.get("reason"))));
      }
      return LookupResponse.newBuilder().setOperation(operation).build();
    }

    static Ownership ownership(Map<?, ?> fields) {
      int number = integer(fields.get("attempt"));
      return Ownership.newBuilder()
          .setOperationId("op-1")
          .setFence(10 + number)
          .setAttempt(number)
          .setMaxAttempts(5)
          .setLease(duration(fields.get("lease")))
          .setAttemptDeadline(duration(fields.get("attempt_deadline")))
          .build();
    }

    static ClaimResponse claimResponse(Map<?, ?> answer) {
      Map.Entry<?, ?> only = answer.entrySet().iterator().next();
      Map<?, ?> fields = map(only.getValue());
      switch ((String) only.getKey()) {
        case "acquired":
          return ClaimResponse.newBuilder()
              .setAcquired(Acquired.newBuilder().setOwnership(ownership(fields)))
              .build();
        case "reconcile_first":
          ReconcileFirst.Builder first =
              ReconcileFirst.newBuilder()
                  .setOwnership(ownership(fields))
                  .setPreviousState(OperationState.OPERATION_STATE_IN_PROGRESS)
                  .setPreviousFence(9 + integer(fields.get("attempt")));
          if (fields.containsKey("previous_attempt_deadline")) {
            first.setPreviousAttemptDeadline(duration(fields.get("previous_attempt_deadline")));
          }
          return ClaimResponse.newBuilder().setReconcileFirst(first).build();
        case "completed":
          Completed.Builder completed =
              Completed.newBuilder()
                  .setOperationId("op-1")
                  .setAttempts(integer(fields.get("attempts")));
          if (fields.containsKey("error")) {
            completed
                .setState(OperationState.OPERATION_STATE_FAILED)
                .setError(
                    OperationError.newBuilder()
                        .setReason(FailureReason.FAILURE_REASON_TERMINAL)
                        .setCode((String) fields.get("error")));
          } else {
            completed
                .setState(OperationState.OPERATION_STATE_SUCCEEDED)
                .setResult(
                    dev.idemd.idem.v1.Result.newBuilder()
                        .setBody(ByteString.copyFromUtf8((String) fields.get("body"))));
          }
          return ClaimResponse.newBuilder().setCompleted(completed).build();
        case "pending":
          return ClaimResponse.newBuilder()
              .setPending(
                  Pending.newBuilder()
                      .setOperationId("op-1")
                      .setAttempt(1)
                      .setReason(PendingReason.valueOf("PENDING_REASON_" + fields.get("reason")))
                      .setRetryAfter(duration(fields.get("retry_after"))))
              .build();
        case "needs_reconciliation":
          return ClaimResponse.newBuilder()
              .setNeedsReconciliation(
                  NeedsReconciliation.newBuilder()
                      .setOperationId("op-1")
                      .setFence(14)
                      .setAttempts(integer(fields.get("attempts"))))
              .build();
        default: // "unrecognised": an outcome added later decodes as none
          return ClaimResponse.getDefaultInstance();
      }
    }

    // ---- guarded work and the renewals beside it ----------------------------------------

    /** Runs the renewals from {@code step} until they pause or finish. */
    void advanceRenewals(Step step) {
      while (true) {
        if (step instanceof Step.Sleep sleep) {
          renewalsParked = true;
          renewalsWakeAt = now + sleep.nanos();
          return;
        }
        if (step instanceof Step.Finish) {
          renewalsParked = false;
          return;
        }
        step = renewals.next(send((Step.Send<?, ?>) step));
      }
    }

    /** Lets {@code takes} pass within the attempt; false when the guard stopped the work. */
    boolean guarded(Attempt attempt, long takes) {
      if (renewals != null && !renewalsStarted) {
        renewalsStarted = true;
        advanceRenewals(renewals.start());
      }
      long ends = now + takes;
      while (true) {
        long stop = Math.min(ends, attempt.cancelAt);
        if (renewalsParked && renewalsWakeAt < stop) {
          now = Math.max(now, renewalsWakeAt);
          renewalsParked = false;
          advanceRenewals(renewals.next(Answer.DONE));
          if (attempt.lost()) {
            return false;
          }
          continue;
        }
        if (ends > attempt.cancelAt) {
          now = Math.max(now, attempt.cancelAt);
          return false;
        }
        now = ends;
        return true;
      }
    }

    static Outcome outcome(Object returns) {
      if (returns == Json.NULL || returns == null) {
        return null;
      }
      Map<?, ?> fields = map(returns);
      if (fields.containsKey("success")) {
        return Outcome.success(
            ((String) fields.get("success")).getBytes(StandardCharsets.UTF_8), "");
      }
      if (fields.containsKey("terminal")) {
        return Outcome.terminal((String) fields.get("terminal"), "");
      }
      if (fields.containsKey("retryable")) {
        return Outcome.retryable(
            (String) fields.get("retryable"),
            "",
            Duration.ofNanos(nanos(fields.get("retry_after"))));
      }
      return Outcome.unknown((String) fields.get("unknown"), "");
    }

    Answer perform(Step step) {
      if (step instanceof Step.Send<?, ?> send) {
        return send(send);
      }
      if (step instanceof Step.Sleep sleep) {
        now += sleep.nanos();
        return Answer.DONE;
      }
      if (step instanceof Step.StartRenewing start) {
        attempt = start.attempt();
        renewals = new Renewals(start.attempt());
        renewalsStarted = false;
        renewalsParked = false;
        return Answer.DONE;
      }
      if (step instanceof Step.StopRenewing) {
        renewals = null;
        renewalsParked = false;
        return Answer.DONE;
      }
      Step.Guarded guarded = (Step.Guarded) step;
      if (guarded.work() == Step.Work.PAUSE) {
        return guarded(guarded.attempt(), guarded.nanos()) ? Answer.DONE : Answer.INTERRUPTED;
      }
      Map<?, ?> script = expect(guarded.work() == Step.Work.EFFECT ? "effect" : "provider_lookup");
      if (script.containsKey("previous_outcome_unknown")) {
        assertEquals(
            script.get("previous_outcome_unknown"),
            guarded.attempt().context.previousOutcomeUnknown(),
            where());
      }
      if (!guarded(guarded.attempt(), takes(script))) {
        return Answer.INTERRUPTED;
      }
      if (Boolean.TRUE.equals(script.get("raises"))) {
        return new Answer.Raised(new IllegalStateException("the scripted effect or lookup raised"));
      }
      return new Answer.Returned(outcome(script.get("returns")));
    }

    static String kind(Throwable error) {
      if (error instanceof AttemptTimeoutException) {
        return "ATTEMPT_TIMEOUT";
      }
      if (error instanceof OutcomeUnknownException) {
        return "OUTCOME_UNKNOWN";
      }
      if (error instanceof OperationFailedException) {
        return "OPERATION_FAILED";
      }
      if (error instanceof PendingException) {
        return "PENDING";
      }
      if (error instanceof NeedsReconciliationException) {
        return "NEEDS_RECONCILIATION";
      }
      if (error instanceof SupersededException) {
        return "SUPERSEDED";
      }
      if (error instanceof UnrecognisedOutcomeException) {
        return "UNRECOGNISED_OUTCOME";
      }
      if (error instanceof IdemdStatusException) {
        return "STATUS";
      }
      return error.getClass().getName();
    }

    void check() {
      ExecuteOnceProtocol protocol =
          new ExecuteOnceProtocol(
              "payments.charge",
              "order-1",
              Payload.json("{\"amount\":1000,\"currency\":\"EUR\"}"),
              options(),
              () -> now,
              () -> {
                tokens.add(
                    String.format("claim-token-%04d", tokens.size() + 1)
                        .getBytes(StandardCharsets.UTF_8));
                return tokens.get(tokens.size() - 1);
              });
      Step step = protocol.start();
      while (!(step instanceof Step.Finish || step instanceof Step.Raise)) {
        step = protocol.next(perform(step));
      }
      assertEquals(
          1,
          steps.size(),
          where() + ": the call ended (" + step + ") before the vector's step " + steps.get(0));
      Map<?, ?> last = steps.get(0);
      if (last.containsKey("result")) {
        Map<?, ?> expected = map(last.get("result"));
        if (step instanceof Step.Raise raise) {
          fail("'" + name + "': raised " + raise.error() + ", the vector expects a result");
        }
        OperationResult result = ((Step.Finish) step).result();
        assertArrayEquals(
            ((String) expected.get("body")).getBytes(StandardCharsets.UTF_8), result.body(), name);
        assertEquals(expected.get("replayed"), result.replayed(), name);
        assertEquals(integer(expected.get("attempts")), result.attempts(), name);
        return;
      }
      Map<?, ?> expected = map(last.get("raises"));
      assertInstanceOf(Step.Raise.class, step, name + ": the vector expects " + expected);
      Throwable error = ((Step.Raise) step).error();
      assertEquals(expected.get("kind"), kind(error), name + ": raised " + error);
      if (error instanceof OperationFailedException failed) {
        assertEquals("FAILURE_REASON_" + expected.get("reason"), failed.reason().name(), name);
        assertEquals(expected.get("replayed"), failed.replayed(), name);
      }
      if (error instanceof IdemdStatusException status) {
        if (expected.containsKey("reason")) {
          assertEquals(expected.get("reason"), status.reason().orElse(null), name);
        }
        if (expected.containsKey("code")) {
          assertEquals(expected.get("code"), status.code().name(), name);
        }
      }
    }
  }
}
