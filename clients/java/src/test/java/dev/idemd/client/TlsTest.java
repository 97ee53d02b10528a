package dev.idemd.client;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.idemd.idem.v1.ListUnresolvedRequest;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * TLS from the builder's options, against idemd serving TLS with a certificate of a CA made here
 * (openssl): https:// addresses, a custom CA, a client certificate (mTLS) option.
 */
class TlsTest {
  @TempDir static Path dir;
  static TestServer server;

  static final RetryPolicy ONCE =
      RetryPolicy.builder().maxSends(1).callTimeout(Duration.ofSeconds(5)).build();

  static void openssl(String... args) throws IOException, InterruptedException {
    List<String> command = new java.util.ArrayList<>(List.of("openssl"));
    command.addAll(List.of(args));
    Process process;
    try {
      process =
          new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true).start();
    } catch (IOException missing) {
      throw new AssertionError(
          "the TLS tests make their certificates with openssl: install it", missing);
    }
    String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (!process.waitFor(60, TimeUnit.SECONDS) || process.exitValue() != 0) {
      throw new AssertionError("openssl " + command + " failed: " + output);
    }
  }

  @BeforeAll
  static void serveTls() throws Exception {
    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=idemd test CA");
    openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost");
    Files.writeString(
        dir.resolve("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
            + "basicConstraints=CA:FALSE\n"
            + "keyUsage=digitalSignature,keyEncipherment\n"
            + "extendedKeyUsage=serverAuth,clientAuth\n");
    openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "server.ext");
    server =
        TestServer.start(
            TestServer.EMBEDDED,
            Map.of(
                "IDEMD_TLS_CERT", dir.resolve("server.pem").toString(),
                "IDEMD_TLS_KEY", dir.resolve("server.key").toString()));
  }

  @AfterAll
  static void stop() {
    if (server != null) {
      server.close();
    }
  }

  IdemdClient.Builder builder(String address) {
    return IdemdClient.builder().address(address).token(server.token).retryPolicy(ONCE);
  }

  static void call(IdemdClient client) {
    client.listUnresolved(ListUnresolvedRequest.newBuilder().setPageSize(1).build());
  }

  @Test
  void anHttpsAddressWithTheServersCaConnects() {
    try (IdemdClient client =
        builder("https://localhost:" + server.port())
            .caCertificate(dir.resolve("ca.pem"))
            .build()) {
      call(client);
    }
    try (IdemdClient client =
        builder("127.0.0.1:" + server.port()).caCertificate(dir.resolve("ca.pem")).build()) {
      call(client); // a CA implies TLS for a host:port address
    }
  }

  @Test
  void aClientCertificateIsOfferedWithTheCa() {
    try (IdemdClient client =
        builder("https://localhost:" + server.port())
            .caCertificate(dir.resolve("ca.pem"))
            .clientCertificate(dir.resolve("server.pem"), dir.resolve("server.key"))
            .build()) {
      call(client);
    }
  }

  @Test
  void aServerTheClientDoesNotTrustIsUnavailable() {
    try (IdemdClient client = builder("https://localhost:" + server.port()).build()) {
      UnavailableException refused = assertThrows(UnavailableException.class, () -> call(client));
      assertFalse(refused.reason().isPresent());
    }
    try (IdemdClient plaintext = builder("http://localhost:" + server.port()).build()) {
      IdemdStatusException refused =
          assertThrows(IdemdStatusException.class, () -> call(plaintext));
      assertFalse(refused.reason().isPresent());
    }
  }

  @Test
  void unreadableCertificateFilesFailTheBuild() {
    UncheckedIOException missing =
        assertThrows(
            UncheckedIOException.class,
            () -> builder("https://localhost:1").caCertificate(dir.resolve("missing.pem")).build());
    assertTrue(missing.getMessage().contains("TLS"), missing.getMessage());
  }
}
