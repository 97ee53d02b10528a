package dev.idemd.client;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The fault campaign's worker for the Java client (faults/workers/README.md): reads deliveries as
 * JSON lines on stdin, runs the blocking {@link IdemdClient#executeOnce} for each (a thread each,
 * all at once) against the duplicating stages named in IDEMD_FAULTS_TARGETS, with the effect and
 * the lookup at the campaign's HTTP provider (IDEMD_FAULTS_PROVIDER), and writes each delivery's
 * outcome as a JSON line on stdout.
 *
 * <p>It lives with the tests, not in the published jar, and uses the client's public API only,
 * except the package's JSON reader and writer (the delivery lines are JSON; the client has no JSON
 * dependency to lean on). faults/workers/java/run builds and starts it.
 */
final class FaultsWorker {
  private static final String PROVIDER = System.getenv("IDEMD_FAULTS_PROVIDER");
  private static final HttpClient HTTP =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(5))
          .build();
  private static final RetryPolicy RETRY =
      RetryPolicy.builder()
          .maxSends(200)
          .initialBackoff(Duration.ofMillis(20))
          .maxBackoff(Duration.ofMillis(300))
          .totalTimeout(Duration.ofSeconds(20))
          .callTimeout(Duration.ofSeconds(2))
          .build();

  private final List<IdemdClient> clients;

  private FaultsWorker(List<IdemdClient> clients) {
    this.clients = clients;
  }

  /** One GET to the campaign's provider: its status and body. Interruptible (the effect's). */
  private static HttpResponse<byte[]> get(String path) throws IOException, InterruptedException {
    HttpRequest request =
        HttpRequest.newBuilder(URI.create(PROVIDER + path)).timeout(Duration.ofSeconds(30)).build();
    return HTTP.send(request, HttpResponse.BodyHandlers.ofByteArray());
  }

  private static String quote(String text) {
    return URLEncoder.encode(text, StandardCharsets.UTF_8);
  }

  private static void noteAttempt(EffectContext context) throws IOException, InterruptedException {
    int takeover = context.previousOutcomeUnknown() ? 1 : 0;
    get(
        "/attempt?reference="
            + quote(context.operationId())
            + "&fence="
            + context.fence()
            + "&takeover="
            + takeover);
  }

  private static Outcome.Success perform(EffectContext context, boolean honourKey)
      throws IOException, InterruptedException {
    byte[] body =
        get("/perform?reference="
                + quote(context.operationId())
                + "&honour_key="
                + (honourKey ? 1 : 0))
            .body();
    return Outcome.success(body, "application/json");
  }

  private static boolean flag(Map<?, ?> request, String name) {
    return Boolean.TRUE.equals(request.get(name));
  }

  private static long number(Map<?, ?> request, String name) {
    return Long.parseLong(((Json.Number) request.get(name)).canonical());
  }

  private Map<String, Object> deliver(Map<?, ?> request) {
    IdemdClient client = clients.get((int) (number(request, "client") % clients.size()));
    String key = (String) request.get("key");
    boolean conflict = flag(request, "conflict");
    boolean honourKey = flag(request, "honour_key");
    Map<?, ?> stall = request.get("stall") instanceof Map<?, ?> given ? given : null;
    long workMs = number(request, "work_ms");
    AtomicBoolean effectRan = new AtomicBoolean();
    AtomicBoolean found = new AtomicBoolean();
    Effect effect =
        context -> {
          noteAttempt(context);
          effectRan.set(true);
          if (conflict) {
            get("/forbidden?key=" + quote(key));
            return Outcome.terminal("CONFLICT_EXECUTED", "a conflicting reuse ran its effect");
          }
          if (stall != null) {
            if (flag(stall, "performed_first")) {
              perform(context, false);
            }
            // Interrupted at the attempt deadline, before the second perform.
            Thread.sleep(number(stall, "ms"));
            return perform(context, false);
          }
          Thread.sleep(workMs);
          return perform(context, honourKey);
        };
    ProviderLookup lookup =
        context -> {
          noteAttempt(context);
          HttpResponse<byte[]> answer = get("/lookup?reference=" + quote(context.operationId()));
          if (answer.statusCode() != 200) {
            return null;
          }
          found.set(true);
          return Outcome.success(answer.body(), "application/json");
        };
    ExecuteOptions.Builder options =
        ExecuteOptions.builder()
            .lease(Duration.ofMillis(number(request, "lease_ms")))
            .attemptDuration(Duration.ofMillis(number(request, "attempt_ms")))
            .deadline(Duration.ofMillis(number(request, "deadline_ms")))
            .maxAttempts((int) number(request, "max_attempts"));
    if (!conflict) {
      if (honourKey) {
        options.providerDeduplicates(true);
      } else {
        options.lookup(lookup);
      }
    }
    Map<String, Object> reply = new LinkedHashMap<>();
    try {
      OperationResult result =
          client.executeOnce(
              "faults.transfer",
              key,
              Payload.json((String) request.get("payload")),
              options.build(),
              effect);
      String source =
          result.replayed()
              ? "replayed"
              : found.get() && !effectRan.get() ? "reconciled" : "executed";
      reply.put("outcome", "succeeded");
      reply.put("operation_id", result.operationId());
      reply.put("body", result.bodyText());
      reply.put("source", source);
      return reply;
    } catch (ConflictException conflicting) {
      return error(reply, "conflict", null);
    } catch (OperationFailedException failed) {
      reply.put("outcome", "failed");
      reply.put("operation_id", failed.operationId().orElse(""));
      reply.put("code", failed.errorCode());
      return reply;
    } catch (LeaseLostException | SupersededException lost) {
      return error(reply, "lease_lost", null);
    } catch (OutcomeUnknownException unknown) {
      return error(reply, "outcome_unknown", unknown.operationId().orElse(null));
    } catch (NeedsReconciliationException needs) {
      return error(reply, "needs_reconciliation", needs.operationId().orElse(null));
    } catch (PendingException pending) {
      return error(reply, "deadline_passed", pending.operationId().orElse(null));
    } catch (ExecuteOnceException | RuntimeException other) {
      // Transport, unavailable, anything else: the campaign delivers again.
      System.err.println("delivery " + request.get("id") + ": " + other);
      return error(reply, "other", null);
    }
  }

  private static Map<String, Object> error(
      Map<String, Object> reply, String kind, String operationId) {
    reply.put("outcome", "error");
    reply.put("error", kind);
    if (operationId != null) {
      reply.put("operation_id", operationId);
    }
    return reply;
  }

  public static void main(String[] arguments) throws Exception {
    String token = System.getenv("IDEMD_FAULTS_TOKEN");
    // Two connections to each replica's stage, in the campaign's order (each client has a
    // channel of its own, so a connection of its own).
    List<IdemdClient> clients = new ArrayList<>();
    for (String target : System.getenv("IDEMD_FAULTS_TARGETS").split(",")) {
      for (int copy = 0; copy < 2; copy++) {
        clients.add(IdemdClient.builder().address(target).token(token).retryPolicy(RETRY).build());
      }
    }
    FaultsWorker worker = new FaultsWorker(clients);
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    out.println("{\"ready\":true}");
    // A thread per delivery: the blocking executeOnce runs its effect on it and interrupts it
    // at the attempt deadline.
    ExecutorService running = Executors.newCachedThreadPool();
    BufferedReader lines =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line = lines.readLine(); line != null; line = lines.readLine()) {
      if (line.isBlank()) {
        continue;
      }
      Map<?, ?> request = (Map<?, ?>) Json.parse(line);
      running.execute(
          () -> {
            Map<String, Object> reply = worker.deliver(request);
            reply.put("id", request.get("id"));
            String text = Json.canonical(reply);
            synchronized (out) {
              out.println(text);
            }
          });
    }
    running.shutdown();
    running.awaitTermination(1, TimeUnit.HOURS);
    for (IdemdClient client : clients) {
      client.close();
    }
  }
}
