package dev.idemd.client;

import java.io.IOException;

/** A real idemd for tests outside this package (the servlet filter's). */
public final class TestSupport implements AutoCloseable {
  private final TestServer server;

  private TestSupport(TestServer server) {
    this.server = server;
  }

  /** The stores every server test runs on; Postgres tests abort without DATABASE_URL. */
  public static String[] stores() {
    return ServerTest.stores();
  }

  /** A server of its own on {@code store}, with a tenant of its own. */
  public static TestSupport start(String store) throws IOException {
    return start(store, java.util.Map.of());
  }

  /** The same, with {@code env} added to the server's environment. */
  public static TestSupport start(String store, java.util.Map<String, String> env)
      throws IOException {
    if (store.equals(TestServer.POSTGRES)) {
      org.junit.jupiter.api.Assumptions.assumeTrue(
          TestServer.postgresConfigured(),
          "set DATABASE_URL=postgres://... to run the Postgres store's tests");
    }
    return new TestSupport(TestServer.start(store, env));
  }

  public IdemdClient client() {
    return server.client();
  }

  @Override
  public void close() {
    server.close();
  }
}
