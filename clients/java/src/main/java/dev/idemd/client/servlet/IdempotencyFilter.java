package dev.idemd.client.servlet;

import dev.idemd.client.EffectContext;
import dev.idemd.client.ExecuteOnceException;
import dev.idemd.client.ExecuteOptions;
import dev.idemd.client.IdemdClient;
import dev.idemd.client.IdemdStatusException;
import dev.idemd.client.InvalidArgumentException;
import dev.idemd.client.OperationResult;
import dev.idemd.client.Outcome;
import dev.idemd.client.OutcomeUnknownException;
import dev.idemd.client.Payload;
import dev.idemd.client.Selector;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.stream.Collectors;

/**
 * The IETF {@code Idempotency-Key} header for any servlet application, backed by idemd through
 * {@link IdemdClient#executeOnce}, with the answers of every idemd middleware (the Python ASGI/WSGI
 * and the TypeScript Express ones). For the configured methods (POST and PATCH by default):
 *
 * <ul>
 *   <li>no {@code Idempotency-Key} where one is required: 400;
 *   <li>a key but no caller to scope it to (no principal, keys not shared): 400;
 *   <li>the same key with another request (method, path, query, content type, body), or a key whose
 *       response is no longer kept: 422 ({@link Builder#conflictStatus});
 *   <li>the same key while the first request still runs: 409 with {@code Retry-After} ({@link
 *       Builder#inProgressStatus});
 *   <li>the same key again: the stored response replayed (status, the headers kept, body), with
 *       {@code Idempotent-Replayed: true}, without calling the application.
 * </ul>
 *
 * <p>Errors are RFC 9457 {@code application/problem+json}. The application's response is captured
 * whole (at most {@code maxResponseBytes}), stored at idemd, and only then sent: a client never
 * sees a response that a retry would not see again. The application runs on the request's thread,
 * with the request attribute {@value #CONTEXT_ATTRIBUTE} set to the {@link EffectContext} ({@code
 * operationId()} for providers' idempotency keys).
 *
 * <p><b>Keys are per caller</b>, as Stripe scopes them per account and
 * draft-ietf-httpapi-idempotency-key-header per client: idemd is sent {@link #scopedKey
 * scopedKey(principal, key)}, so two callers who send the same key get their own effects and
 * responses. The principal is by default the request's {@code Authorization} header; name it from
 * your authentication ({@link Builder#principal}) whenever a caller's credentials may change
 * between its retries (a refreshed short-lived token would make its retry another caller's). A key
 * without a principal is refused with 400 unless {@link Builder#sharedKeys(boolean)
 * sharedKeys(true)}, for routes whose callers are one system. Scoped, a key is at most 222 bytes.
 *
 * <p>The response must be complete when the chain returns: register the filter without {@code
 * asyncSupported} (the container then refuses {@code startAsync()} behind it).
 *
 * <p>An application that throws leaves the outcome UNKNOWN at idemd, and the exception propagates.
 * A retry of that key never runs the application (it declines, Fail NOT_STARTED) and is answered
 * 500, unless {@link Builder#reconcileFirst(ReconcileFirst) reconcileFirst(RUN)} declares that the
 * application's providers deduplicate by the {@code operationId} it passes them.
 */
public final class IdempotencyFilter implements Filter {
  /** The request attribute holding the {@link EffectContext} while the application runs. */
  public static final String CONTEXT_ATTRIBUTE = "idemd.idempotency";

  /** What a retry after an attempt of unknown outcome does. */
  public enum ReconcileFirst {
    /** Never run the application again: decline (Fail NOT_STARTED) and answer 500. */
    REFUSE,
    /**
     * Run it again, told so ({@link EffectContext#previousOutcomeUnknown()}): declares that its
     * providers deduplicate by the {@link EffectContext#operationId()} it passes them.
     */
    RUN
  }

  private final Supplier<IdemdClient> clientSupplier;
  private volatile IdemdClient client;
  private final Set<String> methods;
  private final boolean required;
  private final String header;
  private final Function<HttpServletRequest, String> operation;
  private final Function<HttpServletRequest, String> principal;
  private final boolean sharedKeys;
  private final int maxKeyBytes;
  private final HttpMapping.Response invalidKey;
  private final List<String> keepHeaders;
  private final ExecuteOptions options;
  private final int maxRequestBytes;
  private final int maxResponseBytes;
  private final int conflictStatus;
  private final int inProgressStatus;
  private final Selector selector;
  private final List<Selector> previousSelectors;

  private IdempotencyFilter(Builder builder) {
    this.clientSupplier = builder.client;
    this.methods = builder.methods;
    this.required = builder.required;
    this.header = builder.header;
    this.operation = builder.operation;
    this.principal = builder.principal;
    this.sharedKeys = builder.sharedKeys;
    this.maxKeyBytes =
        sharedKeys
            ? HttpMapping.MAX_KEY_BYTES
            : HttpMapping.MAX_KEY_BYTES - HttpMapping.PRINCIPAL_PREFIX_BYTES;
    this.invalidKey = HttpMapping.invalidKey(maxKeyBytes);
    this.keepHeaders = builder.keepHeaders;
    this.options =
        ExecuteOptions.builder()
            .lease(builder.lease)
            .attemptDuration(builder.attemptDuration)
            .deadline(builder.pendingWait)
            // REFUSE: executeOnce declines a ReconcileFirst itself (NOT_STARTED).
            .providerDeduplicates(builder.reconcileFirst == ReconcileFirst.RUN)
            .build();
    this.maxRequestBytes = builder.maxRequestBytes;
    this.maxResponseBytes = builder.maxResponseBytes;
    this.conflictStatus = builder.conflictStatus;
    this.inProgressStatus = builder.inProgressStatus;
    this.selector =
        builder.selector == null || builder.selector.isEmpty() ? null : builder.selector;
    this.previousSelectors = builder.previousSelectors;
  }

  /** A builder; {@code client} is required. */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * The key sent to idemd for {@code key} sent by {@code principal}: {@code hex(SHA-256(UTF-8
   * principal))[0:32] + ":" + key}, the same in every idemd client.
   */
  public static String scopedKey(String principal, String key) {
    return HttpMapping.scopedKey(principal, key);
  }

  /** The key of an {@code Idempotency-Key} header: an RFC 8941 sf-string, or a bare token. */
  public static String parseKey(String header) {
    return HttpMapping.parseKey(header);
  }

  /** {@code http.<method><path>} in idemd's operation alphabet, at most 128 characters. */
  public static String defaultOperation(HttpServletRequest request) {
    return HttpMapping.operationName(request.getMethod(), path(request));
  }

  /** The request's {@code Authorization} header, or null. */
  public static String defaultPrincipal(HttpServletRequest request) {
    return request.getHeader("Authorization");
  }

  private IdemdClient client() {
    IdemdClient made = client;
    if (made == null) {
      synchronized (this) {
        if (client == null) {
          client = Objects.requireNonNull(clientSupplier.get(), "the client supplier gave null");
        }
        made = client;
      }
    }
    return made;
  }

  @Override
  public void doFilter(ServletRequest req, ServletResponse res, FilterChain chain)
      throws IOException, ServletException {
    if (!(req instanceof HttpServletRequest) || !(res instanceof HttpServletResponse)) {
      chain.doFilter(req, res);
      return;
    }
    HttpServletRequest request = (HttpServletRequest) req;
    HttpServletResponse response = (HttpServletResponse) res;
    String method = request.getMethod().toUpperCase(Locale.ROOT);
    if (!methods.contains(method)) {
      chain.doFilter(req, res);
      return;
    }
    String raw = request.getHeader(header);
    if (raw == null) {
      if (required) {
        refuseUnread(request, response, HttpMapping.MISSING_KEY);
      } else {
        chain.doFilter(req, res);
      }
      return;
    }
    String key = HttpMapping.parseKey(raw);
    if (!HttpMapping.validKey(key, maxKeyBytes)) {
      refuseUnread(request, response, invalidKey);
      return;
    }
    if (!sharedKeys) {
      String caller = principal.apply(request);
      if (caller == null || caller.isEmpty()) {
        refuseUnread(request, response, HttpMapping.NO_PRINCIPAL);
        return;
      }
      key = HttpMapping.scopedKey(caller, key);
    }
    byte[] body;
    try {
      body = readBody(request);
    } catch (RequestTooLarge tooLarge) {
      send(response, HttpMapping.TOO_LARGE);
      return;
    }
    String contentType = request.getContentType() == null ? "" : request.getContentType();
    String query = request.getQueryString() == null ? "" : request.getQueryString();
    Payload identity;
    if (selector == null) {
      identity = HttpMapping.requestIdentity(method, path(request), query, contentType, body);
    } else {
      try {
        identity =
            Payload.fingerprint(selector.fingerprint(body, selectedHeaders(selector, request)));
      } catch (InvalidArgumentException notAnObject) { // not JSON, or not an object: 400
        send(response, HttpMapping.answerFor(notAnObject, conflictStatus, inProgressStatus));
        return;
      }
    }
    List<byte[]> previous = previousFingerprints(request, method, query, contentType, body);
    ExecuteOptions requestOptions =
        previous.isEmpty() ? options : options.toBuilder().previousFingerprints(previous).build();
    OperationResult result;
    try {
      result =
          client()
              .executeOnce(
                  operation.apply(request),
                  key,
                  identity,
                  requestOptions,
                  ctx -> runApplication(request, response, body, chain, ctx));
    } catch (ExecuteOnceException | IdemdStatusException failed) {
      Throwable cause = failed.getCause();
      if (failed instanceof OutcomeUnknownException && cause instanceof CapturedResponse.TooLarge) {
        send(response, HttpMapping.RESPONSE_TOO_LARGE);
        return;
      }
      if (failed instanceof OutcomeUnknownException && isApplications(cause)) {
        rethrow(cause); // the application's own exception
      }
      HttpMapping.Response answer = HttpMapping.answerFor(failed, conflictStatus, inProgressStatus);
      if (answer == null) {
        throw new ServletException("idemd: " + failed.getMessage(), failed);
      }
      send(response, answer);
      return;
    }
    send(response, HttpMapping.replayed(result));
  }

  /**
   * The request's fingerprints under the previous selectors (an empty one: the whole request, as
   * without a selector). A body a previous selector cannot apply to gives none under it: the
   * version that used it refused that body (400), so no operation of its can be waiting for it.
   */
  private List<byte[]> previousFingerprints(
      HttpServletRequest request, String method, String query, String contentType, byte[] body) {
    List<byte[]> fingerprints = new ArrayList<>();
    for (Selector previous : previousSelectors) {
      if (previous.isEmpty()) {
        fingerprints.add(
            HttpMapping.requestFingerprint(method, path(request), query, contentType, body));
        continue;
      }
      try {
        fingerprints.add(previous.fingerprint(body, selectedHeaders(previous, request)));
      } catch (InvalidArgumentException notForThisSelector) {
        // Nothing to match under it (above).
      }
    }
    return fingerprints;
  }

  /** The request's values of the selector's headers, each name's in arrival order. */
  private static List<Map.Entry<String, String>> selectedHeaders(
      Selector selector, HttpServletRequest request) {
    List<Map.Entry<String, String>> pairs = new ArrayList<>();
    for (String name : selector.headers()) {
      for (String value : Collections.list(request.getHeaders(name))) {
        pairs.add(Map.entry(name, value));
      }
    }
    return pairs;
  }

  private static boolean isApplications(Throwable cause) {
    return cause != null
        && !(cause instanceof IdemdStatusException)
        && !(cause instanceof ExecuteOnceException);
  }

  private static void rethrow(Throwable cause) throws IOException, ServletException {
    if (cause instanceof IOException) {
      throw (IOException) cause;
    }
    if (cause instanceof ServletException) {
      throw (ServletException) cause;
    }
    if (cause instanceof RuntimeException) {
      throw (RuntimeException) cause;
    }
    if (cause instanceof Error) {
      throw (Error) cause;
    }
    throw new ServletException(cause);
  }

  private Outcome runApplication(
      HttpServletRequest request,
      HttpServletResponse response,
      byte[] body,
      FilterChain chain,
      EffectContext context)
      throws IOException, ServletException {
    BufferedRequest replayedRequest = new BufferedRequest(request, body);
    replayedRequest.setAttribute(CONTEXT_ATTRIBUTE, context);
    CapturedResponse captured = new CapturedResponse(response, maxResponseBytes);
    try {
      chain.doFilter(replayedRequest, captured);
    } finally {
      replayedRequest.removeAttribute(CONTEXT_ATTRIBUTE);
    }
    return HttpMapping.stored(
        captured.capturedStatus(),
        captured.capturedHeaders(),
        captured.capturedBody(),
        keepHeaders);
  }

  /** The request body was larger than {@code maxRequestBytes}. */
  private static final class RequestTooLarge extends IOException {
    private static final long serialVersionUID = 1L;
  }

  /**
   * A refusal before the body was read. The body is read first and dropped (up to the size limit):
   * a container that finds it unread when the response is done may close the connection, and a
   * client that has already taken that connection for its next request sees that request fail. Past
   * the limit, or if reading fails, the refusal is sent anyway.
   */
  private void refuseUnread(
      HttpServletRequest request, HttpServletResponse response, HttpMapping.Response answer)
      throws IOException {
    try {
      readBody(request);
    } catch (IOException unreadOrTooLarge) {
      // The refusal stands; the container decides what becomes of the connection.
    }
    send(response, answer);
  }

  private byte[] readBody(HttpServletRequest request) throws IOException {
    long length = request.getContentLengthLong();
    if (length > maxRequestBytes) {
      throw new RequestTooLarge();
    }
    ByteArrayOutputStream body = new ByteArrayOutputStream();
    byte[] chunk = new byte[8192];
    try (InputStream in = request.getInputStream()) {
      int read;
      while ((read = in.read(chunk)) != -1) {
        if (body.size() + read > maxRequestBytes) {
          throw new RequestTooLarge();
        }
        body.write(chunk, 0, read);
      }
    }
    return body.toByteArray();
  }

  private static String path(HttpServletRequest request) {
    String path =
        request.getContextPath()
            + request.getServletPath()
            + (request.getPathInfo() == null ? "" : request.getPathInfo());
    return path.isEmpty() ? "/" : path;
  }

  private static void send(HttpServletResponse response, HttpMapping.Response answer)
      throws IOException {
    if (response.isCommitted()) {
      throw new IOException("the response was already committed; cannot send idemd's answer");
    }
    // Only the body: headers that filters before this one set (CORS, security headers) stay.
    response.resetBuffer();
    response.setStatus(answer.status());
    for (Map.Entry<String, String> header : answer.headers()) {
      if (header.getKey().equals("content-length")) {
        response.setContentLength(answer.body().length);
      } else if (header.getKey().equals("content-type")) {
        response.setContentType(header.getValue());
      } else {
        response.addHeader(header.getKey(), header.getValue());
      }
    }
    OutputStream out = response.getOutputStream();
    out.write(answer.body());
    out.flush();
  }

  /** Options of an {@link IdempotencyFilter}. */
  public static final class Builder {
    private Supplier<IdemdClient> client;
    private Set<String> methods = Set.of("POST", "PATCH");
    private boolean required = true;
    private String header = "Idempotency-Key";
    private Function<HttpServletRequest, String> operation = IdempotencyFilter::defaultOperation;
    private Function<HttpServletRequest, String> principal = IdempotencyFilter::defaultPrincipal;
    private boolean sharedKeys;
    private List<String> keepHeaders = HttpMapping.DEFAULT_KEEP_HEADERS;
    private Duration lease = Duration.ofSeconds(30);
    private Duration attemptDuration = Duration.ofMinutes(5);
    private Duration pendingWait = Duration.ZERO;
    private int maxRequestBytes = 1 << 20;
    private int maxResponseBytes = 1 << 20;
    private ReconcileFirst reconcileFirst = ReconcileFirst.REFUSE;
    private int conflictStatus = HttpMapping.DEFAULT_CONFLICT_STATUS;
    private Selector selector;
    private List<Selector> previousSelectors = List.of();
    private int inProgressStatus = HttpMapping.DEFAULT_IN_PROGRESS_STATUS;

    private Builder() {}

    /** The idemd client (shared by the server's threads). */
    public Builder client(IdemdClient client) {
      Objects.requireNonNull(client, "client");
      this.client = () -> client;
      return this;
    }

    /** A function that makes the client, called once, at the first request. */
    public Builder client(Supplier<IdemdClient> client) {
      this.client = Objects.requireNonNull(client, "client");
      return this;
    }

    /** The methods that take a key; default POST and PATCH. */
    public Builder methods(String... methods) {
      this.methods =
          java.util.Arrays.stream(methods)
              .map(m -> m.toUpperCase(Locale.ROOT))
              .collect(Collectors.toUnmodifiableSet());
      return this;
    }

    /** Whether those methods must carry a key (else 400); default true. */
    public Builder required(boolean required) {
      this.required = required;
      return this;
    }

    /** The key's header; default {@code Idempotency-Key}. */
    public Builder header(String header) {
      this.header = Objects.requireNonNull(header, "header");
      return this;
    }

    /** The operation name of a request; default {@code http.<method><path>}. */
    public Builder operation(Function<HttpServletRequest, String> operation) {
      this.operation = Objects.requireNonNull(operation, "operation");
      return this;
    }

    /**
     * Who is calling, to scope keys by (a user or account id from your authentication); null or
     * empty for no caller. Default: the {@code Authorization} header.
     */
    public Builder principal(Function<HttpServletRequest, String> principal) {
      this.principal = Objects.requireNonNull(principal, "principal");
      return this;
    }

    /**
     * One key space for every caller of the routes (the key is sent as it is and no principal is
     * needed): only for routes whose callers are one system.
     */
    public Builder sharedKeys(boolean sharedKeys) {
      this.sharedKeys = sharedKeys;
      return this;
    }

    /** Response headers stored and replayed besides Content-Type (lower case). */
    public Builder keepHeaders(String... names) {
      this.keepHeaders =
          java.util.Arrays.stream(names)
              .map(n -> n.toLowerCase(Locale.ROOT))
              .collect(Collectors.toUnmodifiableList());
      return this;
    }

    public Builder lease(Duration lease) {
      this.lease = Objects.requireNonNull(lease, "lease");
      return this;
    }

    public Builder attemptDuration(Duration attemptDuration) {
      this.attemptDuration = Objects.requireNonNull(attemptDuration, "attemptDuration");
      return this;
    }

    /**
     * How long a request for a key that is still running waits for it before the in-progress
     * refusal (409 by default); default 0, at once.
     */
    public Builder pendingWait(Duration pendingWait) {
      this.pendingWait = Objects.requireNonNull(pendingWait, "pendingWait");
      return this;
    }

    public Builder maxRequestBytes(int maxRequestBytes) {
      this.maxRequestBytes = maxRequestBytes;
      return this;
    }

    public Builder maxResponseBytes(int maxResponseBytes) {
      this.maxResponseBytes = maxResponseBytes;
      return this;
    }

    /** A retry after an attempt of unknown outcome: {@code REFUSE} (default) or {@code RUN}. */
    public Builder reconcileFirst(ReconcileFirst reconcileFirst) {
      this.reconcileFirst = Objects.requireNonNull(reconcileFirst, "reconcileFirst");
      return this;
    }

    /**
     * The status of the refusal of a key used with another request (method, path, query, content
     * type, body), and of a key whose response is no longer kept; default 422 (Unprocessable
     * Content), as draft-ietf-httpapi-idempotency-key-header says. The problem body is the same
     * whatever the status. {@link #build} refuses a status outside 400..599.
     */
    public Builder conflictStatus(int conflictStatus) {
      this.conflictStatus = conflictStatus;
      return this;
    }

    /**
     * The status of the refusal of a key whose first request still runs; default 409 (Conflict), as
     * draft-ietf-httpapi-idempotency-key-header says. It keeps its {@code Retry-After} and problem
     * body whatever the status. {@link #build} refuses a status outside 400..599.
     */
    public Builder inProgressStatus(int inProgressStatus) {
      this.inProgressStatus = inProgressStatus;
      return this;
    }

    /**
     * The fields of the JSON body, and the headers, that define a request instead of the whole of
     * it (docs/api.md, "Request selectors"): a retry that changes something outside them replays,
     * one that changes something inside them gets {@link #conflictStatus}. A body it cannot apply
     * to (not I-JSON, or not an object while include or exclude is given) is answered 400. The
     * operation (by default method and path) still scopes the key; the query and the content type
     * count only when selected (a header). {@link Selector.Builder#build} refuses a selector that
     * cannot be right.
     */
    public Builder selector(Selector selector) {
      this.selector = selector;
      return this;
    }

    /**
     * While a deployment replaces the {@link #selector} (a field added to it, or a selector where
     * there was none): the selectors of the versions being replaced, at most {@value
     * ExecuteOptions#MAX_PREVIOUS_FINGERPRINTS}; an empty {@code Selector.builder().build()} stands
     * for the whole request (method, path, query, content type, body), as without a selector. The
     * filter computes each request's fingerprint under each and sends them as the Claim's previous
     * fingerprints, so that a retry of a request an old version took replays (or waits, or resumes)
     * instead of getting {@link #conflictStatus}; a request that differs under every selector still
     * conflicts. None (the default) outside a rollout; remove them once the old version's responses
     * are no longer kept. {@link #build} refuses more than four.
     */
    public Builder previousSelectors(Selector... selectors) {
      return previousSelectors(java.util.Arrays.asList(selectors));
    }

    /** {@link #previousSelectors(Selector...)} from a list. */
    public Builder previousSelectors(List<Selector> selectors) {
      selectors.forEach(selector -> Objects.requireNonNull(selector, "selector"));
      this.previousSelectors = List.copyOf(selectors);
      return this;
    }

    /**
     * The filter.
     *
     * @throws IllegalArgumentException without a client, or with a {@code conflictStatus} or {@code
     *     inProgressStatus} outside 400..599 (a refusal answered 2xx or 3xx would tell the client
     *     its request was done), or more than four {@code previousSelectors}
     */
    public IdempotencyFilter build() {
      if (client == null) {
        throw new IllegalArgumentException("the filter needs an idemd client: client(...)");
      }
      checkStatus("conflictStatus", conflictStatus);
      checkStatus("inProgressStatus", inProgressStatus);
      if (previousSelectors.size() > ExecuteOptions.MAX_PREVIOUS_FINGERPRINTS) {
        throw new IllegalArgumentException(
            "previousSelectors: at most "
                + ExecuteOptions.MAX_PREVIOUS_FINGERPRINTS
                + ", not "
                + previousSelectors.size());
      }
      return new IdempotencyFilter(this);
    }

    private static void checkStatus(String setting, int status) {
      if (status < 400 || status > 599) {
        throw new IllegalArgumentException(
            setting + " must be a client or server error status (400..599), not " + status);
      }
    }
  }
}
