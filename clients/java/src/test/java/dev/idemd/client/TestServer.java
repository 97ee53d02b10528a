package dev.idemd.client;

import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A real idemd on one store, restartable: the embedded store in a fresh temporary data directory,
 * or Postgres (one fresh database per test run, made and migrated by {@code idemd migrate}; each
 * test is its own tenant, so tests never see each other's operations).
 *
 * <p>IDEMD_BIN names the binary (default: the repository's target/debug/idemd). A missing binary
 * fails the test: a suite that quietly ran without its server would have tested nothing.
 */
final class TestServer implements AutoCloseable {
  static final String EMBEDDED = "embedded";
  static final String POSTGRES = "postgres";
  private static final Pattern LISTEN = Pattern.compile("\"listen\":\"([^\"]+):(\\d+)\"");
  private static String postgresUrl;

  final String store;
  final String token;
  private final Path dir;
  private final Map<String, String> env = new HashMap<>();
  private Process process;
  private int port;
  private int starts;

  private TestServer(String store, Map<String, String> extraEnv) throws IOException {
    this.store = store;
    this.dir = Files.createTempDirectory("idemd-java-test");
    env.put("PATH", System.getenv().getOrDefault("PATH", "/usr/bin:/bin"));
    env.put("IDEMD_METRICS_LISTEN", "off");
    // The tests talk plaintext on loopback; serve refuses that unless asked.
    env.put("IDEMD_INSECURE_PLAINTEXT", "true");
    env.put("IDEMD_MIN_LEASE", "10ms");
    env.put("IDEMD_CLOCK_MARGIN", "0s");
    env.put("IDEMD_LOG_FORMAT", "json");
    env.put("RUST_LOG", "info");
    env.putAll(extraEnv);
    if (store.equals(POSTGRES)) {
      env.put("DATABASE_URL", postgresDatabase());
    } else {
      env.put("IDEMD_DATA_DIR", dir.resolve("data").toString());
    }
    this.token = run("tenant", "create", "java-" + UUID.randomUUID().toString().substring(0, 12));
  }

  /** A new tenant on a running server on {@code store}. */
  static TestServer start(String store) throws IOException {
    return start(store, Map.of());
  }

  static TestServer start(String store, Map<String, String> extraEnv) throws IOException {
    TestServer server = new TestServer(store, extraEnv);
    server.start();
    return server;
  }

  static boolean postgresConfigured() {
    String url = System.getenv("DATABASE_URL");
    return url != null && !url.isEmpty();
  }

  static Path binary() {
    String configured = System.getenv("IDEMD_BIN");
    Path candidate =
        configured != null && !configured.isEmpty()
            ? Path.of(configured)
            : repository().resolve("target/debug/idemd");
    if (!Files.isRegularFile(candidate)) {
      throw new AssertionError("no idemd binary at " + candidate + ": build it or set IDEMD_BIN");
    }
    return candidate.toAbsolutePath();
  }

  static Path repository() {
    return Path.of("").toAbsolutePath().getParent().getParent();
  }

  /** One fresh, migrated database on DATABASE_URL's server for the whole test run. */
  private static synchronized String postgresDatabase() throws IOException {
    if (postgresUrl != null) {
      return postgresUrl;
    }
    String base = System.getenv("DATABASE_URL");
    if (base == null || base.isEmpty()) {
      throw new AssertionError("DATABASE_URL is unset");
    }
    String database =
        "idemd_java_" + UUID.randomUUID().toString().replace("-", "").substring(0, 16);
    URI uri = URI.create(base);
    String url =
        uri.getScheme()
            + "://"
            + uri.getRawAuthority()
            + "/"
            + database
            + (uri.getRawQuery() == null ? "" : "?" + uri.getRawQuery());
    Map<String, String> env =
        Map.of("DATABASE_URL", url, "PATH", System.getenv().getOrDefault("PATH", "/usr/bin:/bin"));
    exec(env, List.of(binary().toString(), "migrate"));
    postgresUrl = url;
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  try {
                    Process drop =
                        new ProcessBuilder(
                                "psql",
                                base,
                                "-q",
                                "-c",
                                "DROP DATABASE IF EXISTS \"" + database + "\" WITH (FORCE)")
                            .redirectErrorStream(true)
                            .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                            .start();
                    drop.waitFor(30, TimeUnit.SECONDS);
                  } catch (IOException | InterruptedException noPsql) {
                    // psql is optional: the database is left behind, named idemd_java_*.
                  }
                }));
    return url;
  }

  String run(String... args) throws IOException {
    List<String> command = new ArrayList<>();
    command.add(binary().toString());
    command.addAll(List.of(args));
    return exec(env, command);
  }

  private static String exec(Map<String, String> env, List<String> command) throws IOException {
    ProcessBuilder builder = new ProcessBuilder(command);
    // Only what is given: an inherited DATABASE_URL would take the embedded store's place.
    builder.environment().clear();
    builder.environment().putAll(env);
    builder.redirectInput(ProcessBuilder.Redirect.PIPE);
    Process process = builder.start();
    process.getOutputStream().close();
    byte[] out = process.getInputStream().readAllBytes();
    byte[] err = process.getErrorStream().readAllBytes();
    try {
      if (!process.waitFor(60, TimeUnit.SECONDS) || process.exitValue() != 0) {
        throw new IOException(
            "idemd " + command + " failed: " + new String(err, StandardCharsets.UTF_8));
      }
    } catch (InterruptedException interrupted) {
      Thread.currentThread().interrupt();
      throw new IOException(interrupted);
    }
    return new String(out, StandardCharsets.UTF_8).trim();
  }

  /** Starts serving; a restart listens on the same port. */
  synchronized void start() throws IOException {
    starts++;
    Path log = dir.resolve("serve-" + starts + ".log");
    ProcessBuilder builder =
        new ProcessBuilder(binary().toString(), "serve", "--listen", "127.0.0.1:" + port);
    builder.environment().clear();
    builder.environment().putAll(env);
    builder.redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
    builder.redirectOutput(ProcessBuilder.Redirect.DISCARD);
    builder.redirectError(log.toFile());
    process = builder.start();
    long end = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (System.nanoTime() < end) {
      String text = Files.readString(log, StandardCharsets.UTF_8);
      for (String line : text.split("\n")) {
        if (line.contains("\"idemd serving\"")) {
          Matcher matcher = LISTEN.matcher(line);
          if (matcher.find()) {
            port = Integer.parseInt(matcher.group(2));
            return;
          }
        }
      }
      if (!process.isAlive()) {
        throw new IOException("idemd exited: " + text);
      }
      sleep(20);
    }
    throw new IOException("idemd did not start: " + Files.readString(log));
  }

  /** SIGKILL: no drain; whatever was not committed is lost. */
  synchronized void kill() {
    if (process != null && process.isAlive()) {
      process.destroyForcibly();
      try {
        process.waitFor(10, TimeUnit.SECONDS);
      } catch (InterruptedException interrupted) {
        Thread.currentThread().interrupt();
      }
    }
    process = null;
  }

  synchronized int starts() {
    return starts;
  }

  int port() {
    return port;
  }

  String address() {
    return "127.0.0.1:" + port;
  }

  /** A client of this server with this test's tenant. */
  IdemdClient client() {
    return IdemdClient.builder().address(address()).token(token).build();
  }

  IdemdClient client(RetryPolicy policy, String address) {
    return IdemdClient.builder().address(address).token(token).retryPolicy(policy).build();
  }

  /** The server's log so far (every start), for a failing test's message. */
  String log() {
    StringBuilder all = new StringBuilder();
    for (int i = 1; i <= starts; i++) {
      try {
        all.append(Files.readString(dir.resolve("serve-" + i + ".log")));
      } catch (IOException gone) {
        all.append("(no log ").append(i).append(")\n");
      }
    }
    return all.toString();
  }

  @Override
  public void close() {
    kill();
    try (var paths = Files.walk(dir)) {
      paths.sorted(java.util.Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
    } catch (IOException ignored) {
      // a temporary directory left behind
    }
  }

  static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException interrupted) {
      Thread.currentThread().interrupt();
      throw new AssertionError(interrupted);
    }
  }
}
