package dev.idemd.client;

import java.nio.charset.StandardCharsets;
import java.util.Map;

/** The recorded result of an operation, made by this call or replayed. */
public final class OperationResult {
  private final String operationId;
  private final byte[] body;
  private final String contentType;
  private final Map<String, String> metadata;
  private final int attempts;
  private final boolean replayed;

  OperationResult(
      String operationId,
      byte[] body,
      String contentType,
      Map<String, String> metadata,
      int attempts,
      boolean replayed) {
    this.operationId = operationId;
    this.body = body.clone();
    this.contentType = contentType;
    this.metadata = Map.copyOf(metadata);
    this.attempts = attempts;
    this.replayed = replayed;
  }

  public String operationId() {
    return operationId;
  }

  public byte[] body() {
    return body.clone();
  }

  /** The body as UTF-8 text. */
  public String bodyText() {
    return new String(body, StandardCharsets.UTF_8);
  }

  public String contentType() {
    return contentType;
  }

  public Map<String, String> metadata() {
    return metadata;
  }

  /** The attempts the operation took (this one included). */
  public int attempts() {
    return attempts;
  }

  /** True when an earlier call stored the result and nothing ran now. */
  public boolean replayed() {
    return replayed;
  }

  @Override
  public String toString() {
    return "OperationResult["
        + operationId
        + ", "
        + body.length
        + " bytes, attempts="
        + attempts
        + (replayed ? ", replayed" : "")
        + "]";
  }
}
