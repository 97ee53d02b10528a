package dev.idemd.client;

import java.net.URI;
import java.net.URISyntaxException;

/**
 * An idemd address as every idemd client accepts it: {@code host:port}, {@code http://host:port}
 * (plaintext) or {@code https://host:port} (TLS).
 */
record Address(String target, boolean tls) {

  static Address parse(String address) {
    if (address == null || address.isBlank()) {
      throw new IllegalArgumentException(
          "no idemd address: pass one (host:port or http(s)://host:port) or set IDEMD_ADDR");
    }
    String trimmed = address.trim();
    boolean tls = false;
    String rest = trimmed;
    int scheme = trimmed.indexOf("://");
    if (scheme >= 0) {
      String name = trimmed.substring(0, scheme).toLowerCase(java.util.Locale.ROOT);
      if (name.equals("https")) {
        tls = true;
      } else if (!name.equals("http")) {
        throw new IllegalArgumentException(
            "unsupported idemd address scheme '" + name + "': use host:port, http:// or https://");
      }
      rest = trimmed.substring(scheme + 3);
      if (rest.endsWith("/")) {
        rest = rest.substring(0, rest.length() - 1);
      }
    }
    URI uri;
    try {
      uri = new URI(null, rest, null, null, null).parseServerAuthority();
    } catch (URISyntaxException | IllegalArgumentException malformed) {
      throw new IllegalArgumentException(
          "invalid idemd address '" + address + "': expected host:port or http(s)://host:port",
          malformed);
    }
    if (uri.getHost() == null || uri.getPort() < 0 || uri.getUserInfo() != null) {
      throw new IllegalArgumentException(
          "invalid idemd address '" + address + "': expected host:port or http(s)://host:port");
    }
    return new Address(rest, tls);
  }
}
