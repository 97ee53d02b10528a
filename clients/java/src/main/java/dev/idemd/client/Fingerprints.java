package dev.idemd.client;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * Request fingerprints computed exactly as idemd computes them: {@code SHA-256("idem.v1" 0x00 mode
 * 0x00 canonical-bytes)}, with mode {@code json} (the RFC 8785 form of an I-JSON document) or
 * {@code bytes} (the payload as given).
 *
 * <p>Prefer sending the payload ({@link Payload#json}, {@link Payload#bytes}) and letting the
 * server fingerprint it; this is for callers that send a fingerprint, e.g. for requests above the
 * server's payload bound. Refused as the server refuses them ({@link NotIJsonException}): duplicate
 * object keys, lone surrogates, integers beyond +-2^53, numbers with a fraction or exponent of
 * magnitude 2^53 or more, numbers that are no integer but that a double rounds to one ({@code
 * 4503599627370496.5}, {@code 1e-400}), numbers with more significant digits than a double holds
 * ({@code 100.10000000000000001} is the double of {@code 100.1}), NaN and Infinity, and anything
 * that is not one JSON document.
 */
public final class Fingerprints {
  private static final byte[] DOMAIN = "idem.v1".getBytes(StandardCharsets.US_ASCII);

  private Fingerprints() {}

  /** The 32-byte fingerprint of a JSON document (mode {@code json}). */
  public static byte[] json(String document) {
    return domainSeparated("json", canonicalJson(document).getBytes(StandardCharsets.UTF_8));
  }

  /** The 32-byte fingerprint of a UTF-8 JSON document (mode {@code json}). */
  public static byte[] json(byte[] utf8Document) {
    return json(decodeUtf8(utf8Document));
  }

  /** The 32-byte fingerprint of an opaque payload (mode {@code bytes}). */
  public static byte[] bytes(byte[] payload) {
    return domainSeparated("bytes", payload);
  }

  /** The RFC 8785 canonical form of an I-JSON document. */
  public static String canonicalJson(String document) {
    return Json.canonical(Json.parse(document));
  }

  static String decodeUtf8(byte[] utf8) {
    try {
      return StandardCharsets.UTF_8
          .newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(utf8))
          .toString();
    } catch (CharacterCodingException malformed) {
      throw new NotIJsonException("not UTF-8: " + malformed.getMessage());
    }
  }

  private static byte[] domainSeparated(String mode, byte[] canonical) {
    MessageDigest sha256;
    try {
      sha256 = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException missing) {
      throw new IllegalStateException("every Java platform has SHA-256", missing);
    }
    sha256.update(DOMAIN);
    sha256.update((byte) 0);
    sha256.update(mode.getBytes(StandardCharsets.US_ASCII));
    sha256.update((byte) 0);
    sha256.update(canonical);
    return sha256.digest();
  }
}
