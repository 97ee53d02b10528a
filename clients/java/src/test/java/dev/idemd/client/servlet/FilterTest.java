package dev.idemd.client.servlet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import dev.idemd.client.ConflictException;
import dev.idemd.client.EffectContext;
import dev.idemd.client.ExecuteOptions;
import dev.idemd.client.IdemdClient;
import dev.idemd.client.InvalidArgumentException;
import dev.idemd.client.OperationResult;
import dev.idemd.client.Outcome;
import dev.idemd.client.Payload;
import dev.idemd.client.ResultExpiredException;
import dev.idemd.client.Selector;
import dev.idemd.client.TestSupport;
import dev.idemd.idem.v1.ClaimRequest;
import dev.idemd.idem.v1.CompleteRequest;
import dev.idemd.idem.v1.HistoryEntry;
import dev.idemd.idem.v1.LookupRequest;
import dev.idemd.idem.v1.OperationState;
import dev.idemd.idem.v1.Ownership;
import dev.idemd.idem.v1.Result;
import dev.idemd.idem.v1.Scope;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.Parameter;
import org.junit.jupiter.params.ParameterizedClass;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The Idempotency-Key servlet filter in an embedded Jetty 12 (ee10: jakarta.servlet 6) in front of
 * a servlet that counts the orders it creates, against a real idemd on each store, called over
 * HTTP.
 */
@ParameterizedClass(name = "[{0}]")
@MethodSource("dev.idemd.client.TestSupport#stores")
class FilterTest {
  static final String ALICE = "Bearer alice";
  static final String BOB = "Bearer bob";

  @Parameter String store;

  TestSupport idemd;
  IdemdClient client;
  final List<Server> jetties = new ArrayList<>();
  final HttpClient http = HttpClient.newHttpClient();

  @BeforeEach
  void start() throws IOException {
    idemd = TestSupport.start(store);
    client = idemd.client();
  }

  @AfterEach
  void stop() throws Exception {
    for (Server jetty : jetties) {
      jetty.stop();
    }
    if (client != null) {
      client.close();
    }
    if (idemd != null) {
      idemd.close();
    }
  }

  /** A servlet app that counts the orders it creates. */
  static final class Shop extends HttpServlet {
    private static final long serialVersionUID = 1L;
    final List<String> orders = Collections.synchronizedList(new ArrayList<>());
    final List<EffectContext> contexts = Collections.synchronizedList(new ArrayList<>());
    final AtomicInteger ids = new AtomicInteger();
    final CountDownLatch entered = new CountDownLatch(1);
    volatile CountDownLatch hold;

    @Override
    protected void doGet(HttpServletRequest request, HttpServletResponse response)
        throws IOException {
      response.setContentType("application/json");
      response.getWriter().write("[" + String.join(",", orders) + "]");
    }

    @Override
    protected void doPost(HttpServletRequest request, HttpServletResponse response)
        throws IOException {
      contexts.add((EffectContext) request.getAttribute(IdempotencyFilter.CONTEXT_ATTRIBUTE));
      if (request.getRequestURI().equals("/form")) {
        response.setStatus(201);
        response.getWriter().write("sku=" + request.getParameter("sku"));
        return;
      }
      String body = new String(request.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (request.getRequestURI().equals("/crash")) {
        orders.add("{\"id\":\"crashed\"}");
        throw new IllegalStateException("the app broke after its effect");
      }
      entered.countDown();
      if (hold != null) {
        try {
          hold.await(10, TimeUnit.SECONDS);
        } catch (InterruptedException stop) {
          Thread.currentThread().interrupt();
        }
      }
      String order = "{\"id\":\"ord_" + ids.incrementAndGet() + "\",\"request\":" + body + "}";
      orders.add(order);
      response.setStatus(201);
      response.setHeader("Location", "/orders/ord_" + ids.get());
      response.setHeader("X-Trace", "t1");
      response.setContentType("application/json");
      // Written in two pieces: the filter stores the whole body.
      byte[] bytes = order.getBytes(StandardCharsets.UTF_8);
      response.getOutputStream().write(bytes, 0, 5);
      response.getOutputStream().write(bytes, 5, bytes.length - 5);
    }
  }

  /** The shop behind the filter, on an embedded Jetty; its base URI. */
  URI serve(HttpServlet app, IdempotencyFilter filter) throws Exception {
    return serve(app, filter, null);
  }

  /** The same, behind {@code before} (a filter mapped ahead of the idempotency filter). */
  URI serve(HttpServlet app, IdempotencyFilter filter, jakarta.servlet.Filter before)
      throws Exception {
    Server jetty = new Server(new InetSocketAddress("127.0.0.1", 0));
    ServletContextHandler context = new ServletContextHandler();
    if (before != null) {
      context.addFilter(new FilterHolder(before), "/*", EnumSet.of(DispatcherType.REQUEST));
    }
    context.addFilter(new FilterHolder(filter), "/*", EnumSet.of(DispatcherType.REQUEST));
    context.addServlet(new ServletHolder(app), "/*");
    jetty.setHandler(context);
    jetty.start();
    jetties.add(jetty);
    return URI.create(
        "http://127.0.0.1:" + ((ServerConnector) jetty.getConnectors()[0]).getLocalPort());
  }

  IdempotencyFilter.Builder filter() {
    return IdempotencyFilter.builder().client(client);
  }

  HttpResponse<String> post(URI base, String path, String body, String... headers)
      throws Exception {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(base.resolve(path))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body));
    for (int i = 0; i < headers.length; i += 2) {
      request.header(headers[i], headers[i + 1]);
    }
    return http.send(request.build(), HttpResponse.BodyHandlers.ofString());
  }

  static String idemKey() {
    return "\"k-" + UUID.randomUUID() + "\"";
  }

  List<String> events(String operation, String key) {
    return client
        .lookup(
            LookupRequest.newBuilder()
                .setScope(Scope.newBuilder().setOperation(operation).setKey(key))
                .setIncludeHistory(true)
                .build())
        .getHistoryList()
        .stream()
        .filter(entry -> !entry.getEvent().equals("RENEWED"))
        .map(entry -> entry.getEvent() + ":" + entry.getDetail())
        .collect(Collectors.toList());
  }

  @Test
  void replaysTheStatusTheKeptHeadersAndTheBody() throws Exception {
    Shop shop = new Shop();
    URI base = serve(shop, filter().build());
    String key = idemKey();
    var first =
        post(
            base,
            "/orders",
            "{\"sku\":\"a\",\"qty\":1}",
            "Idempotency-Key",
            key,
            "Authorization",
            ALICE);
    var again =
        post(
            base,
            "/orders",
            "{\"sku\":\"a\",\"qty\":1}",
            "Idempotency-Key",
            key,
            "Authorization",
            ALICE);
    assertEquals(201, first.statusCode());
    assertEquals(201, again.statusCode());
    assertEquals(first.body(), again.body());
    assertEquals(1, shop.orders.size());
    assertEquals("/orders/ord_1", first.headers().firstValue("location").orElseThrow());
    assertEquals("/orders/ord_1", again.headers().firstValue("location").orElseThrow());
    assertTrue(
        again.headers().firstValue("content-type").orElseThrow().startsWith("application/json"));
    assertEquals("true", again.headers().firstValue("idempotent-replayed").orElseThrow());
    assertFalse(first.headers().firstValue("idempotent-replayed").isPresent());
    assertFalse(again.headers().firstValue("x-trace").isPresent()); // not kept
    assertTrue(first.body().startsWith("{\"id\":\"ord_1\""), first.body());
  }

  @Test
  void headersThatFiltersBeforeItSetStay() throws Exception {
    Shop shop = new Shop();
    jakarta.servlet.Filter cors =
        (request, response, chain) -> {
          ((HttpServletResponse) response)
              .setHeader("Access-Control-Allow-Origin", "https://shop.example");
          chain.doFilter(request, response);
        };
    URI base = serve(shop, filter().build(), cors);
    String key = idemKey();
    var first =
        post(base, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", key, "Authorization", ALICE);
    var again =
        post(base, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", key, "Authorization", ALICE);
    var refused = post(base, "/orders", "{\"sku\":\"a\"}", "Authorization", ALICE);
    for (var response : List.of(first, again, refused)) {
      assertEquals(
          "https://shop.example",
          response.headers().firstValue("access-control-allow-origin").orElse("(none)"),
          response.statusCode() + " " + response.body());
    }
    assertEquals(1, shop.orders.size());
  }

  @Test
  void aMissingKeyIs400WhereRequiredAndPassesWhereNot() throws Exception {
    Shop shop = new Shop();
    URI strict = serve(shop, filter().build());
    var refused = post(strict, "/orders", "{\"sku\":\"a\"}", "Authorization", ALICE);
    assertEquals(400, refused.statusCode());
    assertEquals(
        "application/problem+json", refused.headers().firstValue("content-type").orElseThrow());
    assertEquals(
        400,
        post(
                strict,
                "/orders",
                "{\"sku\":\"a\"}",
                "Idempotency-Key",
                "\"\"",
                "Authorization",
                ALICE)
            .statusCode());
    assertEquals(0, shop.orders.size());
    URI lenient = serve(shop, filter().required(false).build());
    assertEquals(
        201, post(lenient, "/orders", "{\"sku\":\"a\"}", "Authorization", ALICE).statusCode());
    assertEquals(1, shop.orders.size());
  }

  @Test
  void aSelectorReplaysChangesOutsideItAndRefusesChangesInside() throws Exception {
    Shop shop = new Shop();
    Selector selector = Selector.builder().include("/sku").headers("X-Tenant").build();
    URI base = serve(shop, filter().selector(selector).build());
    String key = idemKey();
    String[] t1 = {"Idempotency-Key", key, "Authorization", ALICE, "X-Tenant", "t1"};
    var first = post(base, "/orders", "{\"sku\":\"a\",\"note\":\"one\"}", t1);
    var outside = post(base, "/orders?page=2", "{\"note\":\"two\",\"sku\":\"a\"}", t1);
    var inside = post(base, "/orders", "{\"sku\":\"b\",\"note\":\"one\"}", t1);
    var otherTenant =
        post(
            base,
            "/orders",
            "{\"sku\":\"a\",\"note\":\"one\"}",
            "Idempotency-Key",
            key,
            "Authorization",
            ALICE,
            "X-Tenant",
            "t2");
    var notAnObject =
        post(base, "/orders", "[\"a\"]", "Idempotency-Key", idemKey(), "Authorization", ALICE);
    assertEquals(201, first.statusCode());
    assertEquals(201, outside.statusCode());
    assertEquals(first.body(), outside.body());
    assertEquals("true", outside.headers().firstValue("idempotent-replayed").orElseThrow());
    assertEquals(422, inside.statusCode());
    assertEquals(422, otherTenant.statusCode());
    assertEquals(400, notAnObject.statusCode());
    assertEquals(
        "application/problem+json", notAnObject.headers().firstValue("content-type").orElse(""));
    assertEquals(1, shop.orders.size());
  }

  @Test
  void executeOnceWithASelectorReplaysChangesOutsideItAndRefusesChangesInside() throws Exception {
    AtomicInteger effects = new AtomicInteger();
    ExecuteOptions amount =
        ExecuteOptions.builder()
            .selector(Selector.builder().include("/amount", "/currency").build())
            .build();
    String k = UUID.randomUUID().toString();
    OperationResult first =
        client.executeOnce(
            "payments.charge",
            k,
            Payload.json("{\"amount\":1000,\"currency\":\"EUR\",\"trace\":\"a\"}"),
            amount,
            ctx -> {
              effects.incrementAndGet();
              return Outcome.success(new byte[] {1}, "application/octet-stream");
            });
    OperationResult again =
        client.executeOnce(
            "payments.charge",
            k,
            Payload.json("{\"trace\":\"b\",\"currency\":\"EUR\",\"amount\":1000}"),
            amount,
            ctx -> Outcome.success(new byte[] {2}, "application/octet-stream"));
    assertFalse(first.replayed());
    assertTrue(again.replayed());
    assertThrows(
        ConflictException.class,
        () ->
            client.executeOnce(
                "payments.charge",
                k,
                Payload.json("{\"amount\":1001,\"currency\":\"EUR\"}"),
                amount,
                ctx -> Outcome.success(new byte[] {3}, "application/octet-stream")));
    assertThrows(
        InvalidArgumentException.class,
        () ->
            client.executeOnce(
                "payments.charge",
                UUID.randomUUID().toString(),
                Payload.json("[1]"),
                amount,
                ctx -> Outcome.success(new byte[] {4}, "application/octet-stream")));
    assertEquals(1, effects.get());
  }

  @Test
  void theSameKeyWithAnotherBodyIs422() throws Exception {
    Shop shop = new Shop();
    URI base = serve(shop, filter().build());
    String key = idemKey();
    assertEquals(
        201,
        post(base, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", key, "Authorization", ALICE)
            .statusCode());
    var changed =
        post(base, "/orders", "{\"sku\":\"b\"}", "Idempotency-Key", key, "Authorization", ALICE);
    assertEquals(422, changed.statusCode());
    assertTrue(changed.body().contains("\"title\": \"Idempotency-Key reused\""), changed.body());
    assertEquals(1, shop.orders.size());
  }

  @Test
  void aKeyStillInProgressIs409WithRetryAfter() throws Exception {
    Shop shop = new Shop();
    shop.hold = new CountDownLatch(1);
    URI base = serve(shop, filter().build());
    String key = idemKey();
    CompletableFuture<HttpResponse<String>> first =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return post(
                    base,
                    "/orders",
                    "{\"sku\":\"a\"}",
                    "Idempotency-Key",
                    key,
                    "Authorization",
                    ALICE);
              } catch (Exception failed) {
                throw new IllegalStateException(failed);
              }
            });
    assertTrue(shop.entered.await(10, TimeUnit.SECONDS));
    var busy =
        post(base, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", key, "Authorization", ALICE);
    shop.hold.countDown();
    var done = first.get(10, TimeUnit.SECONDS);
    assertEquals(409, busy.statusCode());
    assertTrue(Integer.parseInt(busy.headers().firstValue("retry-after").orElseThrow()) >= 1);
    assertEquals(201, done.statusCode());
    assertEquals(1, shop.orders.size());
  }

  @Test
  void aConfiguredConflictStatusIsUsed() throws Exception {
    Shop shop = new Shop();
    URI base = serve(shop, filter().conflictStatus(409).build());
    String key = idemKey();
    assertEquals(
        201,
        post(base, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", key, "Authorization", ALICE)
            .statusCode());
    var changed =
        post(base, "/orders", "{\"sku\":\"b\"}", "Idempotency-Key", key, "Authorization", ALICE);
    assertEquals(409, changed.statusCode());
    assertEquals(
        "application/problem+json", changed.headers().firstValue("content-type").orElseThrow());
    assertEquals(
        "{\"type\": \"about:blank\", \"title\": \"Idempotency-Key reused\", \"status\": 409,"
            + " \"detail\": \"this Idempotency-Key was used with a different request\"}",
        changed.body());
    assertFalse(changed.headers().firstValue("retry-after").isPresent());
    assertEquals(1, shop.orders.size());
    var again =
        post(base, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", key, "Authorization", ALICE);
    assertEquals(201, again.statusCode()); // the first request is replayed as ever
    assertEquals("true", again.headers().firstValue("idempotent-replayed").orElseThrow());
  }

  @Test
  void aConfiguredInProgressStatusIsUsedWithRetryAfter() throws Exception {
    Shop shop = new Shop();
    shop.hold = new CountDownLatch(1);
    URI base = serve(shop, filter().inProgressStatus(429).build());
    String key = idemKey();
    CompletableFuture<HttpResponse<String>> first =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return post(
                    base,
                    "/orders",
                    "{\"sku\":\"a\"}",
                    "Idempotency-Key",
                    key,
                    "Authorization",
                    ALICE);
              } catch (Exception failed) {
                throw new IllegalStateException(failed);
              }
            });
    assertTrue(shop.entered.await(10, TimeUnit.SECONDS));
    var busy =
        post(base, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", key, "Authorization", ALICE);
    shop.hold.countDown();
    var done = first.get(10, TimeUnit.SECONDS);
    assertEquals(429, busy.statusCode());
    assertTrue(Integer.parseInt(busy.headers().firstValue("retry-after").orElseThrow()) >= 1);
    assertEquals(
        "application/problem+json", busy.headers().firstValue("content-type").orElseThrow());
    assertEquals(
        "{\"type\": \"about:blank\", \"title\": \"Request in progress\", \"status\": 429,"
            + " \"detail\": \"a request with this Idempotency-Key is still being processed\"}",
        busy.body());
    assertEquals(201, done.statusCode());
    assertEquals(1, shop.orders.size());
    // The conflict status is its own setting: another body is still 422.
    assertEquals(
        422,
        post(base, "/orders", "{\"sku\":\"b\"}", "Idempotency-Key", key, "Authorization", ALICE)
            .statusCode());
  }

  @Test
  void aKeyWhoseResponseExpiredIsTheConflictStatus() throws Exception {
    // A server of its own whose sweeper makes tombstones at once.
    try (TestSupport sweeping = TestSupport.start(store, Map.of("IDEMD_SWEEP_INTERVAL", "50ms"));
        IdemdClient swept = sweeping.client()) {
      // The first request's result, kept for no time: claimed and completed as the filter
      // would have, then swept into a tombstone.
      String key = "k-" + UUID.randomUUID();
      Scope scope =
          Scope.newBuilder()
              .setOperation("http.post/orders")
              .setKey(IdempotencyFilter.scopedKey(ALICE, key))
              .build();
      ByteString identity =
          ByteString.copyFromUtf8(
              "[\"POST\",\"/orders\",\"\",\"application/json\"]\n{\"sku\":\"a\"}");
      Ownership owner =
          swept
              .claim(
                  ClaimRequest.newBuilder()
                      .setScope(scope)
                      .setBytesPayload(identity)
                      // As short as the server allows: never below the retry
                      // window (one attempt of two seconds).
                      .setLease(com.google.protobuf.Duration.newBuilder().setSeconds(1))
                      .setMaxAttemptDuration(
                          com.google.protobuf.Duration.newBuilder().setSeconds(2))
                      .setMaxAttempts(1)
                      .setRetention(com.google.protobuf.Duration.newBuilder().setSeconds(2))
                      .build())
              .getAcquired()
              .getOwnership();
      swept.complete(
          CompleteRequest.newBuilder()
              .setOperationId(owner.getOperationId())
              .setFence(owner.getFence())
              .setResult(Result.newBuilder().setBody(ByteString.copyFromUtf8("{}")))
              .build());
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (true) {
        try {
          swept.claim(ClaimRequest.newBuilder().setScope(scope).setBytesPayload(identity).build());
        } catch (ResultExpiredException expired) {
          break;
        }
        assertTrue(System.nanoTime() < end, "the sweeper never made a tombstone");
        Thread.sleep(50);
      }
      Shop shop = new Shop();
      Map<Integer, IdempotencyFilter> filters =
          Map.of(
              422,
              IdempotencyFilter.builder().client(swept).build(),
              410,
              IdempotencyFilter.builder().client(swept).conflictStatus(410).build());
      for (Map.Entry<Integer, IdempotencyFilter> filter : filters.entrySet()) {
        var expired =
            post(
                serve(shop, filter.getValue()),
                "/orders",
                "{\"sku\":\"a\"}",
                "Idempotency-Key",
                key,
                "Authorization",
                ALICE);
        assertEquals(filter.getKey(), expired.statusCode(), expired.body());
        assertEquals(
            "{\"type\": \"about:blank\", \"title\": \"Idempotency-Key expired\", \"status\": "
                + filter.getKey()
                + ", \"detail\": \"this Idempotency-Key's response is no longer kept; use a new"
                + " key\"}",
            expired.body());
      }
      assertEquals(0, shop.orders.size());
    }
  }

  @Test
  void onlyTheConfiguredMethodsAreGuarded() throws Exception {
    Shop shop = new Shop();
    URI base = serve(shop, filter().build());
    var listing =
        http.send(
            HttpRequest.newBuilder(base.resolve("/orders")).build(),
            HttpResponse.BodyHandlers.ofString());
    assertEquals(200, listing.statusCode());
    URI patchOnly = serve(shop, filter().methods("PATCH").build());
    assertEquals(201, post(patchOnly, "/orders", "{\"sku\":\"a\"}").statusCode());
    assertEquals(201, post(patchOnly, "/orders", "{\"sku\":\"a\"}").statusCode());
    assertEquals(2, shop.orders.size());
  }

  @Test
  void anApplicationThatThrowsIsUnknownAndNeverRunAgain() throws Exception {
    Shop shop = new Shop();
    URI base = serve(shop, filter().build());
    String key = idemKey();
    var crashed = post(base, "/crash", "{}", "Idempotency-Key", key, "Authorization", ALICE);
    var retried = post(base, "/crash", "{}", "Idempotency-Key", key, "Authorization", ALICE);
    assertEquals(500, crashed.statusCode());
    assertEquals(500, retried.statusCode());
    assertEquals(
        "application/problem+json", retried.headers().firstValue("content-type").orElseThrow());
    assertEquals(1, shop.orders.size());
    // The retry declined (the app never ran), keeping the crashed attempt's doubt.
    String sent = IdempotencyFilter.scopedKey(ALICE, IdempotencyFilter.parseKey(key));
    assertEquals(
        List.of(
            "CLAIMED:",
            "OUTCOME_UNKNOWN:effect_raised",
            "TAKEN_OVER:",
            "OUTCOME_UNKNOWN:not_started"),
        events("http.post/crash", sent).stream()
            .map(e -> e.startsWith("TAKEN_OVER") ? "TAKEN_OVER:" : e)
            .collect(Collectors.toList()));
  }

  @Test
  void reconcileFirstRunDeclaresDeduplicationAndRunsTheApplicationAgain() throws Exception {
    List<EffectContext> seen = Collections.synchronizedList(new ArrayList<>());
    HttpServlet app =
        new HttpServlet() {
          private static final long serialVersionUID = 1L;

          @Override
          protected void doPost(HttpServletRequest request, HttpServletResponse response)
              throws IOException {
            EffectContext ctx =
                (EffectContext) request.getAttribute(IdempotencyFilter.CONTEXT_ATTRIBUTE);
            seen.add(ctx);
            if (seen.size() == 1) {
              throw new IllegalStateException("the app broke after its effect");
            }
            response.setStatus(201);
            response.setContentType("application/json");
            response.getWriter().write("{\"reference\":\"" + ctx.operationId() + "\"}");
          }
        };
    URI base = serve(app, filter().reconcileFirst(IdempotencyFilter.ReconcileFirst.RUN).build());
    String key = idemKey();
    var crashed = post(base, "/orders", "{}", "Idempotency-Key", key, "Authorization", ALICE);
    var retried = post(base, "/orders", "{}", "Idempotency-Key", key, "Authorization", ALICE);
    assertEquals(500, crashed.statusCode());
    assertEquals(201, retried.statusCode());
    assertEquals(
        List.of(false, true),
        seen.stream().map(EffectContext::previousOutcomeUnknown).collect(Collectors.toList()));
    assertEquals("{\"reference\":\"" + seen.get(0).operationId() + "\"}", retried.body());
  }

  @Test
  void keysArePerCaller() throws Exception {
    // Issue 17 item 2: Alice and Bob send the same key and body; each gets an order of their
    // own and their own response, and Alice re-sending gets hers replayed.
    Shop shop = new Shop();
    URI base = serve(shop, filter().build());
    String key = idemKey();
    var alices =
        post(base, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", key, "Authorization", ALICE);
    var bobs =
        post(base, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", key, "Authorization", BOB);
    var again =
        post(base, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", key, "Authorization", ALICE);
    assertEquals(201, alices.statusCode(), alices.body());
    assertEquals(201, bobs.statusCode(), bobs.body());
    assertEquals(201, again.statusCode());
    assertEquals(2, shop.orders.size());
    assertNotEquals(alices.body(), bobs.body());
    assertFalse(bobs.headers().firstValue("idempotent-replayed").isPresent());
    assertEquals(alices.body(), again.body());
    assertEquals("true", again.headers().firstValue("idempotent-replayed").orElseThrow());
  }

  @Test
  void aKeyWithoutACallerIsRefusedUnlessKeysAreShared() throws Exception {
    Shop shop = new Shop();
    String key = idemKey();
    URI scoped = serve(shop, filter().build());
    var refused = post(scoped, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", key);
    assertEquals(400, refused.statusCode());
    assertEquals(
        "application/problem+json", refused.headers().firstValue("content-type").orElseThrow());
    assertTrue(
        refused.body().contains("\"title\": \"Idempotency-Key without a caller\""), refused.body());
    assertTrue(refused.body().contains("scoped per caller"), refused.body());
    assertEquals(0, shop.orders.size());
    // Shared keys: one key space for every caller of the route, the key sent as it is.
    URI shared = serve(shop, filter().sharedKeys(true).build());
    var served = post(shared, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", key);
    var bobs =
        post(shared, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", key, "Authorization", BOB);
    assertEquals(201, served.statusCode());
    assertEquals(201, bobs.statusCode());
    assertEquals(1, shop.orders.size());
    assertEquals(served.body(), bobs.body());
    assertEquals("true", bobs.headers().firstValue("idempotent-replayed").orElseThrow());
    var found =
        client.lookup(
            LookupRequest.newBuilder()
                .setScope(
                    Scope.newBuilder()
                        .setOperation("http.post/orders")
                        .setKey(IdempotencyFilter.parseKey(key)))
                .build());
    assertEquals(OperationState.OPERATION_STATE_SUCCEEDED, found.getOperation().getState());
  }

  @Test
  void aPrincipalFunctionNamesTheCaller() throws Exception {
    Shop shop = new Shop();
    URI base = serve(shop, filter().principal(request -> request.getHeader("X-User")).build());
    String key = idemKey();
    assertEquals(
        201,
        post(base, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", key, "X-User", "u1")
            .statusCode());
    assertEquals(
        201,
        post(base, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", key, "X-User", "u2")
            .statusCode());
    // Credentials alone name no caller for this function.
    assertEquals(
        400,
        post(base, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", key, "Authorization", ALICE)
            .statusCode());
    assertEquals(2, shop.orders.size());
  }

  @Test
  void theFilterSendsTheScopedKeyWithinIdemdsBound() throws Exception {
    Shop shop = new Shop();
    URI base = serve(shop, filter().build());
    String key = "k-" + UUID.randomUUID();
    assertEquals(
        201,
        post(base, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", key, "Authorization", ALICE)
            .statusCode());
    // 33 bytes of the 255 go to the caller's prefix.
    assertEquals(
        201,
        post(
                base,
                "/orders",
                "{\"sku\":\"a\"}",
                "Idempotency-Key",
                "k".repeat(222),
                "Authorization",
                ALICE)
            .statusCode());
    var tooLong =
        post(
            base,
            "/orders",
            "{\"sku\":\"a\"}",
            "Idempotency-Key",
            "k".repeat(223),
            "Authorization",
            ALICE);
    assertEquals(400, tooLong.statusCode());
    assertTrue(tooLong.body().contains("1-222 bytes"), tooLong.body());
    assertEquals(2, shop.orders.size());
    var found =
        client.lookup(
            LookupRequest.newBuilder()
                .setScope(
                    Scope.newBuilder()
                        .setOperation("http.post/orders")
                        .setKey("9d7cce461e4b2f090a3d686b4ae72d25:" + key))
                .build());
    assertEquals(OperationState.OPERATION_STATE_SUCCEEDED, found.getOperation().getState());
    URI shared = serve(shop, filter().sharedKeys(true).build());
    assertEquals(
        201,
        post(shared, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", "k".repeat(255))
            .statusCode());
    assertEquals(
        400,
        post(shared, "/orders", "{\"sku\":\"a\"}", "Idempotency-Key", "k".repeat(256))
            .statusCode());
  }

  @Test
  void formParametersReachTheApplication() throws Exception {
    Shop shop = new Shop();
    URI base = serve(shop, filter().build());
    HttpRequest form =
        HttpRequest.newBuilder(base.resolve("/form"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("Idempotency-Key", idemKey())
            .header("Authorization", ALICE)
            .POST(HttpRequest.BodyPublishers.ofString("sku=book%2042&qty=1"))
            .build();
    HttpResponse<String> created = http.send(form, HttpResponse.BodyHandlers.ofString());
    assertEquals(201, created.statusCode());
    assertEquals("sku=book 42", created.body());
    assertTrue(shop.contexts.get(0) != null && !shop.contexts.get(0).previousOutcomeUnknown());
  }

  static List<String> eventsOf(List<HistoryEntry> history) {
    return history.stream().map(HistoryEntry::getEvent).collect(Collectors.toList());
  }
}
