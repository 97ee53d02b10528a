package dev.idemd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedClass;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The README's first example is {@code examples/ChargeOnce.java} as printed, and it runs: in a JVM
 * of its own with only IDEMD_ADDR and IDEMD_TOKEN, twice (charged, then replayed).
 */
@ParameterizedClass(name = "[{0}]")
@MethodSource(ServerTest.STORES)
class ExampleTest extends ServerTest {
  static final Path EXAMPLE = Path.of("src/test/java/dev/idemd/examples/ChargeOnce.java");

  @Test
  void theReadmeShowsTheExampleAsItIs() throws IOException {
    String readme = Files.readString(Path.of("README.md"), StandardCharsets.UTF_8);
    String example = Files.readString(EXAMPLE, StandardCharsets.UTF_8);
    String body = example.substring(example.indexOf("import "));
    assertTrue(readme.contains(body), "README.md does not show " + EXAMPLE + " as it is");
  }

  @Test
  void theExampleChargesOnceThenReplays() throws Exception {
    assertEquals("{\"charge\":\"ch_1\"} (charged)", runExample());
    assertEquals("{\"charge\":\"ch_1\"} (replayed)", runExample());
  }

  private String runExample() throws Exception {
    String classpath =
        System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
    Path java = Path.of(System.getProperty("java.home"), "bin", "java");
    ProcessBuilder builder =
        new ProcessBuilder(
            List.of(java.toString(), "-cp", classpath, "dev.idemd.examples.ChargeOnce"));
    builder.environment().put("IDEMD_ADDR", server.address());
    builder.environment().put("IDEMD_TOKEN", server.token);
    Path errors = Files.createTempFile("charge-once", ".stderr");
    builder.redirectError(errors.toFile());
    Process process = builder.start();
    String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(process.waitFor(60, TimeUnit.SECONDS));
    String stderr = Files.readString(errors, StandardCharsets.UTF_8);
    Files.delete(errors);
    assertEquals(0, process.exitValue(), output + stderr);
    return output.strip();
  }
}
