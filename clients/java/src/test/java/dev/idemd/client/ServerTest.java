package dev.idemd.client;

import java.io.IOException;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.Parameter;

/**
 * A test against a real server of its own on each store: the embedded store, and Postgres when
 * DATABASE_URL is set. Subclasses are {@code @ParameterizedClass} over {@link #STORES}.
 */
abstract class ServerTest {
  static final String STORES = "dev.idemd.client.ServerTest#stores";

  @Parameter String store;

  TestServer server;
  IdemdClient client;

  static String[] stores() {
    return new String[] {TestServer.EMBEDDED, TestServer.POSTGRES};
  }

  /** Extra server environment; a test class may override it. */
  Map<String, String> serverEnv() {
    return Map.of();
  }

  @BeforeEach
  void startServer() throws IOException {
    if (store.equals(TestServer.POSTGRES)) {
      Assumptions.assumeTrue(
          TestServer.postgresConfigured(),
          "set DATABASE_URL=postgres://... to run the Postgres store's tests");
    }
    server = TestServer.start(store, serverEnv());
    client = server.client();
    // Connected and its classes loaded before the test: a cold JVM can take a second to
    // handle its first answer, which timing tests would count against their leases.
    client.listUnresolved(
        dev.idemd.idem.v1.ListUnresolvedRequest.newBuilder().setPageSize(1).build());
  }

  @AfterEach
  void stopServer() {
    if (client != null) {
      client.close();
    }
    if (server != null) {
      server.close();
    }
  }

  static String key() {
    return "k-" + UUID.randomUUID();
  }
}
