package dev.idemd.client;

import io.grpc.Status;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The fields that define a request, so that a retry which changes anything else (a trace id, a
 * timestamp) replays instead of conflicting: {@code include} and {@code exclude} JSON Pointers (RFC
 * 6901) and, for the HTTP filter, {@code headers}. The syntax and the rules are docs/api.md,
 * "Request selectors", the same in every idemd client; the shared vectors are
 * testdata/selectors.json.
 *
 * <p>The fingerprint is the json-mode fingerprint of the selected document. {@link Builder#build()}
 * refuses a selector that cannot be right ({@link IllegalArgumentException}: the whole-document
 * pointer {@code ""}, a pointer not starting with {@code /}, a {@code ~} not followed by {@code 0}
 * or {@code 1}, a duplicate, a header name that is not a token); applying it to a body it cannot
 * apply to (not I-JSON; not a JSON object while include or exclude is given) throws {@link
 * InvalidArgumentException}, before any RPC.
 */
public final class Selector {
  private static final Pattern TOKEN = Pattern.compile("[!#$%&'*+\\-.^_`|~0-9A-Za-z]+");
  private static final Pattern BAD_ESCAPE = Pattern.compile("~(?![01])");

  private final List<String> include;
  private final List<String> exclude;
  private final List<String> headers;
  private final List<List<String>> includePaths;
  private final List<List<String>> excludePaths;
  private final List<String> headerNames;

  private Selector(Builder builder) {
    this.include = List.copyOf(builder.include);
    this.exclude = List.copyOf(builder.exclude);
    this.headers = List.copyOf(builder.headers);
    this.includePaths = paths("include", include);
    this.excludePaths = paths("exclude", exclude);
    Set<String> names = new HashSet<>();
    List<String> lower = new ArrayList<>();
    for (String name : headers) {
      if (!TOKEN.matcher(name).matches()) {
        throw new IllegalArgumentException("header name \"" + name + "\" is not a token");
      }
      String folded = name.toLowerCase(Locale.ROOT);
      if (!names.add(folded)) {
        throw new IllegalArgumentException("headers names \"" + name + "\" twice");
      }
      lower.add(folded);
    }
    this.headerNames = List.copyOf(lower);
  }

  public static Builder builder() {
    return new Builder();
  }

  public List<String> include() {
    return include;
  }

  public List<String> exclude() {
    return exclude;
  }

  /** The selected header names, as given. */
  public List<String> headers() {
    return headers;
  }

  /** No field is selected: the request is the whole body, as without a selector. */
  public boolean isEmpty() {
    return include.isEmpty() && exclude.isEmpty() && headers.isEmpty();
  }

  /**
   * The RFC 8785 form of the document selected from a JSON body and the request's headers (name,
   * value pairs in arrival order, names in any case): what is fingerprinted.
   *
   * @throws InvalidArgumentException for a body this selector cannot apply to
   */
  public String canonical(String body, List<Map.Entry<String, String>> requestHeaders) {
    return Json.canonical(document(body, requestHeaders));
  }

  /** The json-mode fingerprint of {@link #canonical}. */
  public byte[] fingerprint(String body, List<Map.Entry<String, String>> requestHeaders) {
    return Fingerprints.json(canonical(body, requestHeaders));
  }

  /**
   * The json-mode fingerprint of the document selected from a JSON body, without headers: what the
   * server computes for the selected document, and what {@link
   * ExecuteOptions.Builder#previousFingerprints} takes from the selector a deployment replaces.
   *
   * @throws InvalidArgumentException for a body this selector cannot apply to
   */
  public byte[] fingerprint(String body) {
    return fingerprint(body, List.of());
  }

  /** {@link #fingerprint(String, List)} of a UTF-8 body. */
  public byte[] fingerprint(byte[] body, List<Map.Entry<String, String>> requestHeaders) {
    String text;
    try {
      text = Fingerprints.decodeUtf8(body);
    } catch (NotIJsonException notUtf8) {
      throw refused("the body is not I-JSON: " + notUtf8.getMessage());
    }
    return fingerprint(text, requestHeaders);
  }

  private Object document(String body, List<Map.Entry<String, String>> requestHeaders) {
    Object document;
    try {
      document = Json.parse(body);
    } catch (NotIJsonException notIJson) {
      throw refused("the body is not I-JSON: " + notIJson.getMessage());
    }
    if ((!includePaths.isEmpty() || !excludePaths.isEmpty()) && !(document instanceof Map)) {
      throw refused("include and exclude need a body that is a JSON object");
    }
    if (!includePaths.isEmpty()) {
      Map<String, Object> selected = new LinkedHashMap<>();
      for (List<String> path : includePaths) {
        Map<String, Object> parent = holder(document, path);
        if (parent == null) {
          continue;
        }
        Map<String, Object> target = selected;
        for (String token : path.subList(0, path.size() - 1)) {
          Object next = target.get(token);
          if (!(next instanceof Map)) {
            next = new LinkedHashMap<String, Object>();
            target.put(token, next);
          }
          target = asObject(next);
        }
        String name = path.get(path.size() - 1);
        target.put(name, deepCopy(parent.get(name)));
      }
      document = selected;
    }
    for (List<String> path : excludePaths) {
      Map<String, Object> parent = holder(document, path);
      if (parent != null) {
        parent.remove(path.get(path.size() - 1));
      }
    }
    if (headerNames.isEmpty()) {
      return document;
    }
    Map<String, Object> picked = new LinkedHashMap<>();
    for (String wanted : headerNames) {
      List<String> values = new ArrayList<>();
      for (Map.Entry<String, String> header : requestHeaders) {
        if (header.getKey().toLowerCase(Locale.ROOT).equals(wanted)) {
          values.add(header.getValue());
        }
      }
      if (!values.isEmpty()) {
        picked.put(wanted, String.join(", ", values));
      }
    }
    Map<String, Object> withHeaders = new LinkedHashMap<>();
    withHeaders.put("body", document);
    withHeaders.put("headers", picked);
    return withHeaders;
  }

  /**
   * The object holding the member at path, or null when the path goes through something that is not
   * an object or names an absent member.
   */
  private static Map<String, Object> holder(Object document, List<String> path) {
    Object parent = document;
    for (String token : path.subList(0, path.size() - 1)) {
      parent = parent instanceof Map ? asObject(parent).get(token) : null;
    }
    if (parent instanceof Map && asObject(parent).containsKey(path.get(path.size() - 1))) {
      return asObject(parent);
    }
    return null;
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> asObject(Object value) {
    return (Map<String, Object>) value;
  }

  private static Object deepCopy(Object value) {
    if (value instanceof Map) {
      Map<String, Object> copy = new LinkedHashMap<>();
      asObject(value).forEach((name, member) -> copy.put(name, deepCopy(member)));
      return copy;
    }
    if (value instanceof List) {
      List<Object> copy = new ArrayList<>();
      for (Object item : (List<?>) value) {
        copy.add(deepCopy(item));
      }
      return copy;
    }
    return value;
  }

  private static InvalidArgumentException refused(String message) {
    return (InvalidArgumentException)
        new StatusDetails(
                Status.Code.INVALID_ARGUMENT,
                message,
                "INVALID_REQUEST",
                Map.of(),
                null,
                List.of(new IdemdStatusException.FieldViolation("json_payload", message)),
                null)
            .toException();
  }

  private static List<List<String>> paths(String field, List<String> pointers) {
    if (new HashSet<>(pointers).size() != pointers.size()) {
      throw new IllegalArgumentException(field + " names a pointer twice");
    }
    List<List<String>> paths = new ArrayList<>();
    for (String pointer : pointers) {
      paths.add(tokens(pointer));
    }
    return List.copyOf(paths);
  }

  private static List<String> tokens(String pointer) {
    if (pointer.isEmpty()) {
      throw new IllegalArgumentException(
          "the pointer \"\" (the whole document) cannot be included or excluded");
    }
    if (!pointer.startsWith("/")) {
      throw new IllegalArgumentException("pointer \"" + pointer + "\" does not start with /");
    }
    if (BAD_ESCAPE.matcher(pointer).find()) {
      throw new IllegalArgumentException(
          "pointer \"" + pointer + "\": ~ must be followed by 0 or 1");
    }
    List<String> tokens = new ArrayList<>();
    for (String raw : pointer.substring(1).split("/", -1)) {
      tokens.add(raw.replace("~1", "/").replace("~0", "~"));
    }
    return List.copyOf(tokens);
  }

  /** A builder of {@link Selector}: each list optional, and none is the whole body. */
  public static final class Builder {
    private final List<String> include = new ArrayList<>();
    private final List<String> exclude = new ArrayList<>();
    private final List<String> headers = new ArrayList<>();

    private Builder() {}

    /** JSON Pointers to the members that define the request ({@code /amount}, {@code /a~1b}). */
    public Builder include(String... pointers) {
      return include(Arrays.asList(pointers));
    }

    public Builder include(List<String> pointers) {
      pointers.forEach(pointer -> include.add(Objects.requireNonNull(pointer, "pointer")));
      return this;
    }

    /** JSON Pointers to members that do not define the request. */
    public Builder exclude(String... pointers) {
      return exclude(Arrays.asList(pointers));
    }

    public Builder exclude(List<String> pointers) {
      pointers.forEach(pointer -> exclude.add(Objects.requireNonNull(pointer, "pointer")));
      return this;
    }

    /** Request header names, in any case (the HTTP filter only). */
    public Builder headers(String... names) {
      return headers(Arrays.asList(names));
    }

    public Builder headers(List<String> names) {
      names.forEach(name -> headers.add(Objects.requireNonNull(name, "name")));
      return this;
    }

    /**
     * @throws IllegalArgumentException for a selector that cannot be right
     */
    public Selector build() {
      return new Selector(this);
    }
  }
}
