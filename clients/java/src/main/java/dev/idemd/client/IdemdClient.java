package dev.idemd.client;

import com.google.protobuf.Message;
import dev.idemd.idem.v1.ClaimRequest;
import dev.idemd.idem.v1.ClaimResponse;
import dev.idemd.idem.v1.CompleteRequest;
import dev.idemd.idem.v1.CompleteResponse;
import dev.idemd.idem.v1.DiagnoseRequest;
import dev.idemd.idem.v1.DiagnoseResponse;
import dev.idemd.idem.v1.FailRequest;
import dev.idemd.idem.v1.FailResponse;
import dev.idemd.idem.v1.ForgetRequest;
import dev.idemd.idem.v1.ForgetResponse;
import dev.idemd.idem.v1.GetPolicyRequest;
import dev.idemd.idem.v1.GetPolicyResponse;
import dev.idemd.idem.v1.HoldRequest;
import dev.idemd.idem.v1.HoldResponse;
import dev.idemd.idem.v1.ListHoldsRequest;
import dev.idemd.idem.v1.ListHoldsResponse;
import dev.idemd.idem.v1.ListOperationsRequest;
import dev.idemd.idem.v1.ListOperationsResponse;
import dev.idemd.idem.v1.ListUnresolvedRequest;
import dev.idemd.idem.v1.ListUnresolvedResponse;
import dev.idemd.idem.v1.LookupRequest;
import dev.idemd.idem.v1.LookupResponse;
import dev.idemd.idem.v1.ReconcileRequest;
import dev.idemd.idem.v1.ReconcileResponse;
import dev.idemd.idem.v1.ReleaseRequest;
import dev.idemd.idem.v1.ReleaseResponse;
import dev.idemd.idem.v1.RenewRequest;
import dev.idemd.idem.v1.RenewResponse;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.ForwardingClientCall;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.TlsChannelCredentials;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.DoubleUnaryOperator;
import java.util.function.LongSupplier;

/**
 * A client of idemd on one gRPC channel: every RPC, typed, blocking and asynchronous, and {@link
 * #executeOnce} (the whole client protocol in one call).
 *
 * <p>Every call carries {@code authorization: Bearer <token>}, is re-sent unchanged as its {@link
 * RetryPolicy} decides (UNAVAILABLE and lost replies, honouring RetryInfo and {@code
 * grpc-retry-pushback-ms}), and fails with a typed {@link IdemdStatusException} decoded from the
 * status's {@code google.rpc} details. A client is thread-safe and meant to be shared; {@link
 * #close()} it at the end.
 *
 * <pre>{@code
 * try (IdemdClient client = IdemdClient.builder().build()) {   // IDEMD_ADDR, IDEMD_TOKEN
 *   ...
 * }
 * }</pre>
 */
public final class IdemdClient implements AutoCloseable {
  static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  private final ManagedChannel channel;
  private final boolean ownsChannel;
  private final Channel calls;
  private final RetryPolicy retry;
  private final ScheduledExecutorService scheduler;
  private final LongSupplier clock;
  private final DoubleUnaryOperator jitter;

  private IdemdClient(Builder builder, ManagedChannel channel, boolean ownsChannel, String token) {
    this.channel = channel;
    this.ownsChannel = ownsChannel;
    this.calls = ClientInterceptors.intercept(channel, bearer(token));
    this.retry = builder.retry;
    this.clock = builder.clock;
    this.jitter = builder.jitter;
    ScheduledThreadPoolExecutor timer =
        new ScheduledThreadPoolExecutor(
            1,
            runnable -> {
              Thread thread = new Thread(runnable, "idemd-client-timer");
              thread.setDaemon(true);
              return thread;
            });
    timer.setRemoveOnCancelPolicy(true);
    this.scheduler = timer;
  }

  /** A builder; {@code builder().build()} reads {@code IDEMD_ADDR} and {@code IDEMD_TOKEN}. */
  public static Builder builder() {
    return new Builder();
  }

  /** The retry policy of every call this client makes. */
  public RetryPolicy retryPolicy() {
    return retry;
  }

  // ---- the RPCs, blocking ----------------------------------------------------------------

  /**
   * Claim: start or rejoin an operation. Re-sent unchanged (the same claim_token) after UNAVAILABLE
   * or a lost reply. Execute the effect only on Acquired, or on ReconcileFirst after checking the
   * provider; {@link #executeOnce} does all of that.
   */
  public ClaimResponse claim(ClaimRequest request) {
    return await(claimAsync(request));
  }

  /** Renew: extend the owner's lease, never past the attempt deadline. */
  public RenewResponse renew(RenewRequest request) {
    return await(renewAsync(request));
  }

  /** Complete: record the success result. Only the current fence may. */
  public CompleteResponse complete(CompleteRequest request) {
    return await(completeAsync(request));
  }

  /** Fail with a disposition: TERMINAL, RETRYABLE, UNKNOWN or NOT_STARTED. */
  public FailResponse fail(FailRequest request) {
    return await(failAsync(request));
  }

  /** Lookup by scope or by operation_id, optionally with a page of history. */
  public LookupResponse lookup(LookupRequest request) {
    return await(lookupAsync(request));
  }

  /** Reconcile an operation whose outcome is unknown, from outside evidence. */
  public ReconcileResponse reconcile(ReconcileRequest request) {
    return await(reconcileAsync(request));
  }

  /** One page of the operations a reconciler must look at, oldest first. */
  public ListUnresolvedResponse listUnresolved(ListUnresolvedRequest request) {
    return await(listUnresolvedAsync(request));
  }

  /**
   * One page of the operations a filter such as {@code state:unknown op:payments.*} finds (needs
   * the {@code reconcile} or {@code admin} scope; docs/api.md, "Finding operations").
   */
  public ListOperationsResponse listOperations(ListOperationsRequest request) {
    return await(listOperationsAsync(request));
  }

  /**
   * Turn an ended operation into a tombstone before its retention ends (needs the {@code admin}
   * scope): its result is dropped and the next Claim of its scope gets RESULT_EXPIRED.
   */
  public ForgetResponse forget(ForgetRequest request) {
    return await(forgetAsync(request));
  }

  /**
   * The effective policy for an operation name (needs the {@code reconcile} or {@code admin}
   * scope).
   */
  public GetPolicyResponse getPolicy(GetPolicyRequest request) {
    return await(getPolicyAsync(request));
  }

  /** Stop new owners of an operation name, or of a whole tenant (needs the {@code admin} scope). */
  public HoldResponse hold(HoldRequest request) {
    return await(holdAsync(request));
  }

  /** End a hold (needs the {@code admin} scope). */
  public ReleaseResponse release(ReleaseRequest request) {
    return await(releaseAsync(request));
  }

  /** The holds in force (needs the {@code reconcile} or {@code admin} scope). */
  public ListHoldsResponse listHolds(ListHoldsRequest request) {
    return await(listHoldsAsync(request));
  }

  /**
   * What the evidence about one operation means and the next safe moves (needs the {@code
   * operations}, {@code reconcile} or {@code admin} scope). Reads only.
   */
  public DiagnoseResponse diagnose(DiagnoseRequest request) {
    return await(diagnoseAsync(request));
  }

  // ---- the RPCs, asynchronous ------------------------------------------------------------

  /** {@link #claim}, completing with the answer or a typed {@link IdemdStatusException}. */
  public CompletableFuture<ClaimResponse> claimAsync(ClaimRequest request) {
    return sendClaim(request, Long.MAX_VALUE).thenApply(Answered::response);
  }

  /** {@link #renew}, asynchronously. */
  public CompletableFuture<RenewResponse> renewAsync(RenewRequest request) {
    return send(Rpc.RENEW, request, Long.MAX_VALUE, 0).thenApply(Answered::response);
  }

  /** {@link #complete}, asynchronously. */
  public CompletableFuture<CompleteResponse> completeAsync(CompleteRequest request) {
    return send(Rpc.COMPLETE, request, Long.MAX_VALUE, 0).thenApply(Answered::response);
  }

  /** {@link #fail}, asynchronously. */
  public CompletableFuture<FailResponse> failAsync(FailRequest request) {
    return send(Rpc.FAIL, request, Long.MAX_VALUE, 0).thenApply(Answered::response);
  }

  /** {@link #lookup}, asynchronously. */
  public CompletableFuture<LookupResponse> lookupAsync(LookupRequest request) {
    return send(Rpc.LOOKUP, request, Long.MAX_VALUE, 0).thenApply(Answered::response);
  }

  /** {@link #reconcile}, asynchronously. */
  public CompletableFuture<ReconcileResponse> reconcileAsync(ReconcileRequest request) {
    return send(Rpc.RECONCILE, request, Long.MAX_VALUE, 0).thenApply(Answered::response);
  }

  /** {@link #listUnresolved}, asynchronously. */
  public CompletableFuture<ListUnresolvedResponse> listUnresolvedAsync(
      ListUnresolvedRequest request) {
    return send(Rpc.LIST_UNRESOLVED, request, Long.MAX_VALUE, 0).thenApply(Answered::response);
  }

  /** {@link #listOperations}, asynchronously. */
  public CompletableFuture<ListOperationsResponse> listOperationsAsync(
      ListOperationsRequest request) {
    return send(Rpc.LIST_OPERATIONS, request, Long.MAX_VALUE, 0).thenApply(Answered::response);
  }

  /** {@link #forget}, asynchronously. */
  public CompletableFuture<ForgetResponse> forgetAsync(ForgetRequest request) {
    return send(Rpc.FORGET, request, Long.MAX_VALUE, 0).thenApply(Answered::response);
  }

  /** {@link #getPolicy}, asynchronously. */
  public CompletableFuture<GetPolicyResponse> getPolicyAsync(GetPolicyRequest request) {
    return send(Rpc.GET_POLICY, request, Long.MAX_VALUE, 0).thenApply(Answered::response);
  }

  /** {@link #hold}, asynchronously. */
  public CompletableFuture<HoldResponse> holdAsync(HoldRequest request) {
    return send(Rpc.HOLD, request, Long.MAX_VALUE, 0).thenApply(Answered::response);
  }

  /** {@link #release}, asynchronously. */
  public CompletableFuture<ReleaseResponse> releaseAsync(ReleaseRequest request) {
    return send(Rpc.RELEASE, request, Long.MAX_VALUE, 0).thenApply(Answered::response);
  }

  /** {@link #listHolds}, asynchronously. */
  public CompletableFuture<ListHoldsResponse> listHoldsAsync(ListHoldsRequest request) {
    return send(Rpc.LIST_HOLDS, request, Long.MAX_VALUE, 0).thenApply(Answered::response);
  }

  /** {@link #diagnose}, asynchronously. */
  public CompletableFuture<DiagnoseResponse> diagnoseAsync(DiagnoseRequest request) {
    return send(Rpc.DIAGNOSE, request, Long.MAX_VALUE, 0).thenApply(Answered::response);
  }

  // ---- executeOnce -----------------------------------------------------------------------

  /**
   * Runs {@code effect} at most once for the intent {@code (operation, key, payload)}, with the
   * default {@link ExecuteOptions}: on ReconcileFirst the effect never runs (see {@link
   * #executeOnce(String, String, Payload, ExecuteOptions, Effect)}).
   */
  public OperationResult executeOnce(String operation, String key, Payload payload, Effect effect)
      throws ExecuteOnceException {
    return executeOnce(operation, key, payload, ExecuteOptions.defaults(), effect);
  }

  /**
   * Runs {@code effect} at most once for the intent {@code (operation, key, payload)}: the whole
   * client protocol. {@code key} is made once per business intent and persisted before the first
   * call; {@code payload} identifies the request (the same key with another payload is a {@link
   * ConflictException}, never a replay).
   *
   * <p>The effect runs on this thread only when idemd grants this call the operation (Acquired, or
   * ReconcileFirst with a lookup that found nothing once the earlier attempt settled, or with
   * provider deduplication declared); its lease is renewed meanwhile, and at the attempt deadline
   * the thread is interrupted and the attempt reported UNKNOWN. A stored result is replayed without
   * running anything.
   *
   * @return the result, recorded now or replayed
   * @throws OperationFailedException a terminal error, recorded now or replayed
   * @throws OutcomeUnknownException this attempt's outcome (or an earlier one's that this call
   *     cannot check) is unknown; {@link AttemptTimeoutException} at the attempt deadline
   * @throws PendingException another attempt still runs (or a retry is not due) past {@link
   *     ExecuteOptions#deadline()}
   * @throws NeedsReconciliationException only a reconciler can settle the operation
   * @throws SupersededException another owner took over and has not finished
   * @throws UnrecognisedOutcomeException a Claim outcome this client does not know
   * @throws IdemdStatusException (unchecked) a refusal such as {@link ConflictException}, or a
   *     transport failure that outlasted the retry policy
   */
  public OperationResult executeOnce(
      String operation, String key, Payload payload, ExecuteOptions options, Effect effect)
      throws ExecuteOnceException {
    Objects.requireNonNull(effect, "effect");
    return new BlockingDriver(this, effect, options)
        .run(protocol(operation, key, payload, options));
  }

  /**
   * {@link #executeOnce(String, String, Payload, ExecuteOptions, Effect)} without blocking: the
   * future completes with the result, or fails with the same exceptions. A blocking {@link
   * ExecuteOptions.Builder#lookup lookup} runs on the common fork-join pool; prefer {@link
   * ExecuteOptions.Builder#asyncLookup asyncLookup}. A request refused before any RPC (a selector
   * that cannot read the payload, previous fingerprints out of bounds) fails the future too, with
   * {@link InvalidArgumentException}; only a null argument throws.
   */
  public CompletableFuture<OperationResult> executeOnceAsync(
      String operation, String key, Payload payload, ExecuteOptions options, AsyncEffect effect) {
    Objects.requireNonNull(effect, "effect");
    ExecuteOnceProtocol protocol;
    try {
      protocol = protocol(operation, key, payload, options);
    } catch (IdemdStatusException refused) {
      return CompletableFuture.failedFuture(refused);
    }
    return new AsyncDriver(this, effect, options, java.util.concurrent.ForkJoinPool.commonPool())
        .run(protocol);
  }

  private ExecuteOnceProtocol protocol(
      String operation, String key, Payload payload, ExecuteOptions options) {
    Objects.requireNonNull(operation, "operation");
    Objects.requireNonNull(key, "key");
    Objects.requireNonNull(payload, "payload");
    Objects.requireNonNull(options, "options");
    options.checkPreviousFingerprints();
    return new ExecuteOnceProtocol(
        operation,
        key,
        payload.selected(options.selector()),
        options,
        clock,
        IdemdClient::claimToken);
  }

  private static final java.security.SecureRandom TOKENS = new java.security.SecureRandom();

  /** A random claim_token, made per attempt. */
  static byte[] claimToken() {
    byte[] token = new byte[16];
    TOKENS.nextBytes(token);
    return token;
  }

  // ---- sends, as the protocol makes them ------------------------------------------------

  /** A Claim, re-sent unchanged; the server may hold it for its {@code wait}. */
  CompletableFuture<Answered<ClaimResponse>> sendClaim(ClaimRequest request, long deadline) {
    long wait = request.hasWait() ? Math.max(0, Durations.toNanos(request.getWait())) : 0;
    return send(Rpc.CLAIM, request, deadline, wait);
  }

  /**
   * Sends {@code request}, re-sending it as the retry policy decides, never past {@code deadline}
   * (a {@link Clocks} instant). Completes with the answer and when the answered send began, or with
   * the typed error of the last send.
   */
  <Req extends Message, Resp extends Message> CompletableFuture<Answered<Resp>> send(
      Rpc<Req, Resp> rpc, Req request, long deadline, long extraTimeoutNanos) {
    RetryPlan plan = new RetryPlan(retry, deadline, extraTimeoutNanos, clock, jitter);
    CompletableFuture<Answered<Resp>> answer = new CompletableFuture<>();
    sendOnce(rpc.method, request, plan, answer);
    return answer;
  }

  private <Req, Resp> void sendOnce(
      MethodDescriptor<Req, Resp> method,
      Req request,
      RetryPlan plan,
      CompletableFuture<Answered<Resp>> answer) {
    long timeout;
    try {
      timeout = plan.nextTimeoutNanos();
    } catch (IdemdStatusException noTimeLeft) {
      answer.completeExceptionally(noTimeLeft);
      return;
    }
    long sentAt = plan.sentAt();
    ClientCall<Req, Resp> call =
        calls.newCall(method, CallOptions.DEFAULT.withDeadlineAfter(timeout, TimeUnit.NANOSECONDS));
    ClientCalls.asyncUnaryCall(
        call,
        request,
        new StreamObserver<Resp>() {
          private Resp response;

          @Override
          public void onNext(Resp value) {
            response = value;
          }

          @Override
          public void onError(Throwable failure) {
            IdemdStatusException error = StatusDetails.exceptionOf(failure);
            long delay;
            try {
              delay = plan.delayAfter(error);
            } catch (IdemdStatusException notResent) {
              answer.completeExceptionally(notResent);
              return;
            }
            if (error.code() == Status.Code.UNAVAILABLE) {
              // gRPC's reconnect backoff (1 s growing to 2 min) fails every call at once while
              // it lasts; idemd restarts and failovers are short, so the retry policy paces.
              channel.resetConnectBackoff();
            }
            try {
              scheduler.schedule(
                  () -> sendOnce(method, request, plan, answer), delay, TimeUnit.NANOSECONDS);
            } catch (java.util.concurrent.RejectedExecutionException closed) {
              answer.completeExceptionally(error);
            }
          }

          @Override
          public void onCompleted() {
            answer.complete(new Answered<>(response, sentAt));
          }
        });
  }

  /** The answer of a future, its typed error thrown as is. */
  static <T> T await(CompletableFuture<T> future) {
    try {
      return future.get();
    } catch (InterruptedException interrupted) {
      Thread.currentThread().interrupt();
      future.cancel(false);
      throw StatusDetails.local(
          Status.Code.CANCELLED, "interrupted while waiting for idemd", interrupted);
    } catch (ExecutionException failed) {
      throw rethrow(failed.getCause());
    } catch (CancellationException cancelled) {
      throw StatusDetails.local(Status.Code.CANCELLED, "cancelled", cancelled);
    }
  }

  /** An unchecked throwable as it is; anything else wrapped (never expected here). */
  static RuntimeException rethrow(Throwable cause) {
    if (cause instanceof RuntimeException) {
      throw (RuntimeException) cause;
    }
    if (cause instanceof Error) {
      throw (Error) cause;
    }
    throw new IllegalStateException(cause);
  }

  ScheduledExecutorService scheduler() {
    return scheduler;
  }

  LongSupplier clock() {
    return clock;
  }

  /**
   * Stops the client's timer and, unless the channel was given to the builder, shuts the channel
   * down.
   */
  @Override
  public void close() {
    scheduler.shutdownNow();
    if (ownsChannel) {
      channel.shutdownNow();
      try {
        channel.awaitTermination(5, TimeUnit.SECONDS);
      } catch (InterruptedException interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private static ClientInterceptor bearer(String token) {
    String value = "Bearer " + token;
    return new ClientInterceptor() {
      @Override
      public <Req, Resp> ClientCall<Req, Resp> interceptCall(
          MethodDescriptor<Req, Resp> method, CallOptions options, Channel next) {
        return new ForwardingClientCall.SimpleForwardingClientCall<>(
            next.newCall(method, options)) {
          @Override
          public void start(Listener<Resp> listener, Metadata headers) {
            headers.put(AUTHORIZATION, value);
            super.start(listener, headers);
          }
        };
      }
    };
  }

  /**
   * Options of an {@link IdemdClient}. The address and the token default to the environment's
   * {@code IDEMD_ADDR} and {@code IDEMD_TOKEN}.
   */
  public static final class Builder {
    private String address;
    private String token;
    private Boolean tls;
    private Path caCertificate;
    private Path clientCertificateChain;
    private Path clientPrivateKey;
    private ManagedChannel channel;
    private RetryPolicy retry = RetryPolicy.DEFAULT;
    private Map<String, String> environment = System.getenv();
    private LongSupplier clock = Clocks.SYSTEM;
    private DoubleUnaryOperator jitter =
        ceiling -> ceiling <= 0 ? 0 : ThreadLocalRandom.current().nextDouble(0, ceiling);

    private Builder() {}

    /**
     * {@code host:port} (plaintext unless a TLS option is set), {@code http://host:port}
     * (plaintext) or {@code https://host:port} (TLS). Default: {@code IDEMD_ADDR}.
     */
    public Builder address(String address) {
      this.address = Objects.requireNonNull(address, "address");
      return this;
    }

    /** The bearer token of the tenant's credential. Default: {@code IDEMD_TOKEN}. */
    public Builder token(String token) {
      this.token = Objects.requireNonNull(token, "token");
      return this;
    }

    /** TLS with the system's trusted roots (implied by https:// and the options below). */
    public Builder tls(boolean tls) {
      this.tls = tls;
      return this;
    }

    /** TLS, trusting the CA certificates of this PEM file (instead of the system's roots). */
    public Builder caCertificate(Path pemFile) {
      this.caCertificate = Objects.requireNonNull(pemFile, "pemFile");
      return this;
    }

    /**
     * TLS with a client certificate (mTLS): a PEM certificate chain and its PEM (PKCS#8) private
     * key, for servers that map certificates to tenants.
     */
    public Builder clientCertificate(Path certificateChain, Path privateKey) {
      this.clientCertificateChain = Objects.requireNonNull(certificateChain, "certificateChain");
      this.clientPrivateKey = Objects.requireNonNull(privateKey, "privateKey");
      return this;
    }

    /**
     * A channel of your own (its credentials, load balancing, interceptors); the address and TLS
     * options are then unused, and {@link IdemdClient#close()} leaves it open.
     */
    public Builder channel(ManagedChannel channel) {
      this.channel = Objects.requireNonNull(channel, "channel");
      return this;
    }

    /** How calls are re-sent; default {@link RetryPolicy#DEFAULT}. */
    public Builder retryPolicy(RetryPolicy retry) {
      this.retry = Objects.requireNonNull(retry, "retry");
      return this;
    }

    /** Where {@code IDEMD_ADDR} and {@code IDEMD_TOKEN} are read; default the process's. */
    public Builder environment(Map<String, String> environment) {
      this.environment = Map.copyOf(environment);
      return this;
    }

    Builder clock(LongSupplier clock) {
      this.clock = clock;
      return this;
    }

    Builder jitter(DoubleUnaryOperator jitter) {
      this.jitter = jitter;
      return this;
    }

    /**
     * The client. Throws at once, before any connection: {@link EmptyTokenException} for a missing
     * or empty token, {@link InvalidTokenException} for one no header can carry, {@link
     * IllegalArgumentException} for a malformed address, {@link UncheckedIOException} for
     * unreadable certificate files.
     */
    public IdemdClient build() {
      String bearer = token != null ? token : environment.get("IDEMD_TOKEN");
      if (bearer == null) {
        throw new EmptyTokenException(
            "no idemd token: pass token(...) or set IDEMD_TOKEN to the tenant's bearer token");
      }
      if (bearer.isBlank()) {
        throw new EmptyTokenException(
            "the idemd token is empty: every call would be refused UNAUTHENTICATED; pass the"
                + " tenant's bearer token (token(...) or IDEMD_TOKEN)");
      }
      if (bearer.chars().anyMatch(c -> c < 0x20 || c > 0x7e)) {
        throw new InvalidTokenException(
            "the idemd token has characters a header cannot carry (whitespace or non-ASCII)");
      }
      if (channel != null) {
        return new IdemdClient(this, channel, false, bearer);
      }
      Address parsed = Address.parse(address != null ? address : environment.get("IDEMD_ADDR"));
      boolean useTls =
          parsed.tls()
              || Boolean.TRUE.equals(tls)
              || caCertificate != null
              || clientCertificateChain != null;
      if (parsed.tls() && Boolean.FALSE.equals(tls)) {
        throw new IllegalArgumentException("an https:// address needs TLS; drop tls(false)");
      }
      ManagedChannel made =
          Grpc.newChannelBuilder(parsed.target(), credentials(useTls))
              .userAgent("idemd-java")
              .build();
      return new IdemdClient(this, made, true, bearer);
    }

    private ChannelCredentials credentials(boolean useTls) {
      if (!useTls) {
        return InsecureChannelCredentials.create();
      }
      TlsChannelCredentials.Builder builder = TlsChannelCredentials.newBuilder();
      try {
        if (caCertificate != null) {
          builder.trustManager(caCertificate.toFile());
        }
        if (clientCertificateChain != null) {
          builder.keyManager(clientCertificateChain.toFile(), clientPrivateKey.toFile());
        }
      } catch (IOException unreadable) {
        throw new UncheckedIOException("cannot read the TLS certificate files", unreadable);
      }
      return builder.build();
    }
  }

  /** Durations as the proto carries them. */
  static final class Durations {
    private Durations() {}

    static com.google.protobuf.Duration of(Duration duration) {
      return com.google.protobuf.Duration.newBuilder()
          .setSeconds(duration.getSeconds())
          .setNanos(duration.getNano())
          .build();
    }

    static com.google.protobuf.Duration ofNanos(long nanos) {
      return com.google.protobuf.Duration.newBuilder()
          .setSeconds(Math.floorDiv(nanos, 1_000_000_000L))
          .setNanos((int) Math.floorMod(nanos, 1_000_000_000L))
          .build();
    }

    /** A duration the server sent, in nanoseconds; negative counts as zero. */
    static long toNanos(com.google.protobuf.Duration duration) {
      long nanos = duration.getSeconds() * 1_000_000_000L + duration.getNanos();
      return Math.max(0, nanos);
    }

    static Duration toDuration(com.google.protobuf.Duration duration) {
      return Duration.ofNanos(toNanos(duration));
    }
  }
}
