package dev.idemd.client;

import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.Objects;

/**
 * What an effect reports: {@link Success} (recorded with Complete and replayed to retries), {@link
 * Terminal} (Fail TERMINAL: a final error, replayed), {@link Retryable} (Fail RETRYABLE: the effect
 * certainly did not happen; a later attempt may try again) or {@link Unknown} (Fail UNKNOWN: it may
 * have happened; the next owner reconciles first). An effect that throws counts as Unknown.
 */
public sealed interface Outcome permits Outcome.Found, Outcome.Retryable, Outcome.Unknown {

  /** What a provider lookup may find: the earlier attempt's success or terminal error. */
  sealed interface Found extends Outcome permits Success, Terminal {}

  /** The effect happened: {@code body} is recorded and replayed. */
  static Success success(byte[] body, String contentType) {
    return new Success(body, contentType, Map.of());
  }

  static Success success(byte[] body, String contentType, Map<String, String> metadata) {
    return new Success(body, contentType, metadata);
  }

  /** The effect ended in a final error: recorded and replayed. */
  static Terminal terminal(String code, String message) {
    return new Terminal(code, message, Map.of());
  }

  static Terminal terminal(String code, String message, Map<String, String> metadata) {
    return new Terminal(code, message, metadata);
  }

  /** The effect certainly did not happen: a new attempt after {@code retryAfter}. */
  static Retryable retryable(String code, String message, Duration retryAfter) {
    return new Retryable(code, message, retryAfter, Map.of());
  }

  /** The effect may or may not have happened. */
  static Unknown unknown(String code, String message) {
    return new Unknown(code, message);
  }

  /** Complete with this result. */
  record Success(byte[] body, String contentType, Map<String, String> metadata) implements Found {
    public Success {
      body = Objects.requireNonNull(body, "body").clone();
      contentType = contentType == null ? "" : contentType;
      metadata = Map.copyOf(metadata);
    }

    @Override
    public byte[] body() {
      return body.clone();
    }

    @Override
    public boolean equals(Object other) {
      return other instanceof Success that
          && Arrays.equals(body, that.body)
          && contentType.equals(that.contentType)
          && metadata.equals(that.metadata);
    }

    @Override
    public int hashCode() {
      return Objects.hash(Arrays.hashCode(body), contentType, metadata);
    }

    @Override
    public String toString() {
      return "Success[" + body.length + " bytes, " + contentType + "]";
    }
  }

  /** Fail TERMINAL with this error. */
  record Terminal(String code, String message, Map<String, String> metadata) implements Found {
    public Terminal {
      Objects.requireNonNull(code, "code");
      message = message == null ? "" : message;
      metadata = Map.copyOf(metadata);
    }
  }

  /** Fail RETRYABLE: the effect certainly did not happen. */
  record Retryable(String code, String message, Duration retryAfter, Map<String, String> metadata)
      implements Outcome {
    public Retryable {
      Objects.requireNonNull(code, "code");
      message = message == null ? "" : message;
      retryAfter = retryAfter == null ? Duration.ofSeconds(1) : retryAfter;
      metadata = Map.copyOf(metadata);
    }
  }

  /** Fail UNKNOWN: the effect may have happened. */
  record Unknown(String code, String message) implements Outcome {
    public Unknown {
      code = code == null ? "outcome_unknown" : code;
      message = message == null ? "" : message;
    }
  }
}
