package dev.idemd.client;

import com.google.protobuf.ByteString;
import dev.idemd.idem.v1.ClaimRequest;
import java.util.List;
import java.util.Objects;

/**
 * What identifies a request, so that the same key with another request is refused ({@link
 * ConflictException}) instead of replayed: a JSON document (fingerprinted by the server in its RFC
 * 8785 form), opaque bytes, or a fingerprint computed here ({@link Fingerprints}).
 */
public final class Payload {
  private final String json;
  private final byte[] bytes;
  private final byte[] fingerprint;

  private Payload(String json, byte[] bytes, byte[] fingerprint) {
    this.json = json;
    this.bytes = bytes;
    this.fingerprint = fingerprint;
  }

  /** A JSON document (I-JSON, at most 64 KiB by default). */
  public static Payload json(String document) {
    return new Payload(Objects.requireNonNull(document, "document"), null, null);
  }

  /** Opaque bytes, fingerprinted as given (at most 64 KiB by default). */
  public static Payload bytes(byte[] payload) {
    return new Payload(null, Objects.requireNonNull(payload, "payload").clone(), null);
  }

  /** A 32-byte fingerprint, e.g. {@link Fingerprints#json(String)} of a larger request. */
  public static Payload fingerprint(byte[] fingerprint) {
    if (fingerprint.length != 32) {
      throw new IllegalArgumentException("a fingerprint is 32 bytes");
    }
    return new Payload(null, null, fingerprint.clone());
  }

  /**
   * This payload narrowed to what {@code selector} picks from it: the fingerprint of the selected
   * document.
   *
   * @throws IllegalArgumentException when this is not a JSON payload
   * @throws InvalidArgumentException for a document the selector cannot apply to
   */
  Payload selected(Selector selector) {
    if (selector == null || selector.isEmpty()) {
      return this;
    }
    if (json == null) {
      throw new IllegalArgumentException("a selector applies to a JSON payload (Payload.json)");
    }
    return new Payload(null, null, selector.fingerprint(json, List.of()));
  }

  void setOn(ClaimRequest.Builder request) {
    if (json != null) {
      request.setJsonPayload(json);
    } else if (bytes != null) {
      request.setBytesPayload(ByteString.copyFrom(bytes));
    } else {
      request.setFingerprint(ByteString.copyFrom(fingerprint));
    }
  }
}
