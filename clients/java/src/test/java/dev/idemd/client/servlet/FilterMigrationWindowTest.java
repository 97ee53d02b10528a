package dev.idemd.client.servlet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.idemd.client.IdemdClient;
import dev.idemd.client.Selector;
import dev.idemd.client.TestSupport;
import jakarta.servlet.DispatcherType;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
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
 * A rolling deployment of a servlet application whose selector changes (docs/api.md, "Changing the
 * normalisation while operations are in flight"): the old version selects {@code /amount}, the new
 * one {@code /amount} and {@code /currency}, so the same request body has another fingerprint under
 * each. Two embedded Jettys (old and new version, each with its own order-counting shop) in front
 * of one real idemd on each store; the client's retry reaches the other version, as a load balancer
 * would send it.
 */
@ParameterizedClass(name = "[{0}]")
@MethodSource("dev.idemd.client.TestSupport#stores")
class FilterMigrationWindowTest {
  static final String ALICE = "Bearer alice";
  static final String BODY = "{\"amount\":100,\"currency\":\"EUR\",\"note\":\"first\"}";
  static final Selector OLD = Selector.builder().include("/amount").build();
  static final Selector NEW = Selector.builder().include("/amount", "/currency").build();

  @Parameter String store;

  TestSupport idemd;
  IdemdClient client;
  final List<Server> jetties = new ArrayList<>();
  final HttpClient http = HttpClient.newHttpClient();
  final FilterTest.Shop oldShop = new FilterTest.Shop();
  final FilterTest.Shop newShop = new FilterTest.Shop();

  @BeforeEach
  void start() throws IOException {
    idemd = TestSupport.start(store);
    client = idemd.client();
    // Connected and its classes loaded before the test, as ServerTest does: on a cold JVM the
    // first Claim can outlast the one second a filter without pendingWait gives it (503).
    client.listUnresolved(
        dev.idemd.idem.v1.ListUnresolvedRequest.newBuilder().setPageSize(1).build());
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

  URI serve(FilterTest.Shop shop, IdempotencyFilter filter) throws Exception {
    Server jetty = new Server(new InetSocketAddress("127.0.0.1", 0));
    ServletContextHandler context = new ServletContextHandler();
    context.addFilter(new FilterHolder(filter), "/*", EnumSet.of(DispatcherType.REQUEST));
    context.addServlet(new ServletHolder(shop), "/*");
    jetty.setHandler(context);
    jetty.start();
    jetties.add(jetty);
    return URI.create(
        "http://127.0.0.1:" + ((ServerConnector) jetty.getConnectors()[0]).getLocalPort());
  }

  /**
   * A filter whose Claims get ten seconds: on a loaded machine a cold JVM's first Claim can outlast
   * the one second that a filter without pendingWait gives it (503). Only a request that meets
   * another one in progress waits, and the test that wants that answered at once says so.
   */
  IdempotencyFilter.Builder filter() {
    return IdempotencyFilter.builder().client(client).pendingWait(Duration.ofSeconds(10));
  }

  URI oldVersion(Selector selector) throws Exception {
    return serve(oldShop, (selector == null ? filter() : filter().selector(selector)).build());
  }

  /** The new version, inside the window when given previous selectors. */
  URI newVersion(Selector... previous) throws Exception {
    return serve(newShop, filter().selector(NEW).previousSelectors(previous).build());
  }

  HttpResponse<String> post(URI base, String key, String body) {
    try {
      return http.send(
          HttpRequest.newBuilder(base.resolve("/orders"))
              .header("Content-Type", "application/json")
              .header("Idempotency-Key", key)
              .header("Authorization", ALICE)
              .POST(HttpRequest.BodyPublishers.ofString(body))
              .build(),
          HttpResponse.BodyHandlers.ofString());
    } catch (IOException | InterruptedException failed) {
      throw new IllegalStateException(failed);
    }
  }

  static String idemKey() {
    return "\"k-" + UUID.randomUUID() + "\"";
  }

  int orders() {
    return oldShop.orders.size() + newShop.orders.size();
  }

  @Test
  void aResponseOfTheOldVersionReplaysFromTheNewOneAndAnotherAmountStillConflicts()
      throws Exception {
    URI old = oldVersion(OLD);
    URI inWindow = newVersion(OLD);
    URI outsideWindow = newVersion();
    String key = idemKey();
    var first = post(old, key, BODY);
    assertEquals(201, first.statusCode());

    // Without the old selector the new version refuses the retry: the window is what helps.
    assertEquals(422, post(outsideWindow, key, BODY).statusCode());

    var retried = post(inWindow, key, BODY.replace("first", "retried"));
    assertEquals(201, retried.statusCode());
    assertEquals(first.body(), retried.body());
    assertEquals("true", retried.headers().firstValue("idempotent-replayed").orElseThrow());
    assertEquals(1, orders(), "the order was created once in all");

    var otherAmount = post(inWindow, key, BODY.replace("100", "999"));
    assertEquals(422, otherAmount.statusCode());
    // The old version did not look at the currency, and its operation records no more than it
    // saw: inside the window, its judgement holds for the operations it stored.
    var otherCurrency = post(inWindow, key, BODY.replace("EUR", "USD"));
    assertEquals("true", otherCurrency.headers().firstValue("idempotent-replayed").orElse(""));
    assertEquals(1, orders());

    // A request the new version took first is matched under its own selector, as always.
    String fresh = idemKey();
    assertEquals(201, post(inWindow, fresh, BODY).statusCode());
    assertEquals(201, post(inWindow, fresh, BODY.replace("first", "again")).statusCode());
    assertEquals(422, post(inWindow, fresh, BODY.replace("EUR", "USD")).statusCode());
    assertEquals(2, orders());
  }

  @Test
  void aRequestTheOldVersionStillRunsIsInProgressNotAConflict() throws Exception {
    oldShop.hold = new CountDownLatch(1);
    URI old = oldVersion(OLD);
    URI inWindow =
        serve(
            newShop,
            filter().selector(NEW).previousSelectors(OLD).pendingWait(Duration.ZERO).build());
    String key = idemKey();
    CompletableFuture<HttpResponse<String>> first =
        CompletableFuture.supplyAsync(() -> post(old, key, BODY));
    assertTrue(
        oldShop.entered.await(10, TimeUnit.SECONDS),
        () -> {
          HttpResponse<String> answered = first.getNow(null);
          return "the old version never ran it: " + (answered == null ? "" : answered.body());
        });
    var busy = post(inWindow, key, BODY);
    oldShop.hold.countDown();
    assertEquals(409, busy.statusCode());
    assertEquals(201, first.get(10, TimeUnit.SECONDS).statusCode());
    var replayed = post(inWindow, key, BODY);
    assertEquals(201, replayed.statusCode());
    assertEquals("true", replayed.headers().firstValue("idempotent-replayed").orElseThrow());
    assertEquals(1, orders());
  }

  @Test
  void anEmptyPreviousSelectorIsTheWholeRequestOfAVersionWithoutOne() throws Exception {
    URI old = oldVersion(null);
    URI inWindow = newVersion(Selector.builder().build());
    String key = idemKey();
    var first = post(old, key, BODY);
    assertEquals(201, first.statusCode());
    var retried = post(inWindow, key, BODY);
    assertEquals(201, retried.statusCode());
    assertEquals(first.body(), retried.body());
    assertEquals("true", retried.headers().firstValue("idempotent-replayed").orElseThrow());
    // The old version saw the whole body: a changed note was another request to it.
    assertEquals(422, post(inWindow, key, BODY.replace("first", "other")).statusCode());
    assertEquals(1, orders());
  }

  @Test
  void aBodyAPreviousSelectorCannotReadIsJudgedByTheNewSelectorAlone() throws Exception {
    // The previous selector wants an object; the new one takes the body whole. A JSON array is
    // fine for the new version, and the previous selector's refusal is no 400.
    URI inWindow =
        serve(
            newShop,
            filter()
                .selector(Selector.builder().headers("X-Tenant").build())
                .previousSelectors(OLD)
                .build());
    String key = idemKey();
    var first = post(inWindow, key, "[1,2]");
    assertEquals(201, first.statusCode());
    assertFalse(first.headers().firstValue("idempotent-replayed").isPresent());
    assertEquals(
        "true",
        post(inWindow, key, "[1,2]").headers().firstValue("idempotent-replayed").orElse(""));
    assertEquals(1, orders());
  }

  @Test
  void moreThanFourPreviousSelectorsAreRefusedByBuild() {
    IdempotencyFilter.Builder five =
        IdempotencyFilter.builder()
            .client(client)
            .selector(NEW)
            .previousSelectors(OLD, OLD, OLD, OLD, Selector.builder().build());
    IllegalArgumentException refused = assertThrows(IllegalArgumentException.class, five::build);
    assertTrue(refused.getMessage().contains("previousSelectors"), refused.getMessage());
    IdempotencyFilter.builder().client(client).previousSelectors(OLD, OLD, OLD, OLD).build();
  }
}
