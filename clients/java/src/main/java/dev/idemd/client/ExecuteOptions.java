package dev.idemd.client;

import com.google.protobuf.ByteString;
import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Options of {@link IdemdClient#executeOnce}. On ReconcileFirst (an earlier attempt may have taken
 * effect) the call site must say how this call can tell: a {@link #lookup lookup}, or {@link
 * #providerDeduplicates(boolean) providerDeduplicates(true)}; with neither, the effect never runs
 * and the call fails with {@link OutcomeUnknownException}.
 */
public final class ExecuteOptions {
  /**
   * The most previous fingerprints one Claim may carry (the server's bound): a rollout replaces one
   * normalisation at a time, rarely more than a few.
   */
  public static final int MAX_PREVIOUS_FINGERPRINTS = 4;

  /** The length of a fingerprint: SHA-256. */
  static final int FINGERPRINT_BYTES = 32;

  private final Duration lease;
  private final Duration attemptDuration;
  private final Duration deadline;
  private final ProviderLookup lookup;
  private final AsyncProviderLookup asyncLookup;
  private final boolean providerDeduplicates;
  private final int maxAttempts;
  private final Duration retention;
  private final Duration operationDeadline;
  private final Duration lookupInterval;
  private final Selector selector;
  private final List<ByteString> previousFingerprints;

  private ExecuteOptions(Builder builder) {
    this.lease = builder.lease;
    this.attemptDuration = builder.attemptDuration;
    this.deadline = builder.deadline;
    this.lookup = builder.lookup;
    this.asyncLookup = builder.asyncLookup;
    this.providerDeduplicates = builder.providerDeduplicates;
    this.maxAttempts = builder.maxAttempts;
    this.retention = builder.retention;
    this.operationDeadline = builder.operationDeadline;
    this.lookupInterval = builder.lookupInterval;
    this.selector = builder.selector;
    this.previousFingerprints = List.copyOf(builder.previousFingerprints);
  }

  public static Builder builder() {
    return new Builder();
  }

  /** The defaults (no lookup, no provider deduplication declared). */
  public static ExecuteOptions defaults() {
    return builder().build();
  }

  public Duration lease() {
    return lease;
  }

  public Duration attemptDuration() {
    return attemptDuration;
  }

  public Duration deadline() {
    return deadline;
  }

  ProviderLookup lookup() {
    return lookup;
  }

  AsyncProviderLookup asyncLookup() {
    return asyncLookup;
  }

  boolean hasLookup() {
    return lookup != null || asyncLookup != null;
  }

  public boolean providerDeduplicates() {
    return providerDeduplicates;
  }

  public int maxAttempts() {
    return maxAttempts;
  }

  Duration retention() {
    return retention;
  }

  Duration operationDeadline() {
    return operationDeadline;
  }

  /** The fields of a JSON payload that define the request; null: the whole payload. */
  public Selector selector() {
    return selector;
  }

  public Duration lookupInterval() {
    return lookupInterval;
  }

  /** The request's fingerprints under earlier normalisations (copies); empty outside a window. */
  public List<byte[]> previousFingerprints() {
    List<byte[]> copies = new ArrayList<>();
    previousFingerprints.forEach(fingerprint -> copies.add(fingerprint.toByteArray()));
    return copies;
  }

  /** As sent in every Claim. */
  List<ByteString> previousFingerprintBytes() {
    return previousFingerprints;
  }

  /**
   * Refuses previous fingerprints the server would refuse (more than {@value
   * #MAX_PREVIOUS_FINGERPRINTS}, one not 32 bytes), naming the field as the server does, so that
   * the mistake is found before any RPC and not after the first Claim's send.
   *
   * @throws InvalidArgumentException naming {@code previous_fingerprints} or {@code
   *     previous_fingerprints[i]}
   */
  void checkPreviousFingerprints() {
    List<IdemdStatusException.FieldViolation> violations = new ArrayList<>();
    if (previousFingerprints.size() > MAX_PREVIOUS_FINGERPRINTS) {
      violations.add(
          new IdemdStatusException.FieldViolation(
              "previous_fingerprints",
              "at most "
                  + MAX_PREVIOUS_FINGERPRINTS
                  + " previous fingerprints, not "
                  + previousFingerprints.size()));
    }
    for (int index = 0; index < previousFingerprints.size(); index++) {
      int length = previousFingerprints.get(index).size();
      if (length != FINGERPRINT_BYTES) {
        violations.add(
            new IdemdStatusException.FieldViolation(
                "previous_fingerprints[" + index + "]",
                "a fingerprint is " + FINGERPRINT_BYTES + " bytes, not " + length));
      }
    }
    if (violations.isEmpty()) {
      return;
    }
    String message =
        violations.stream()
            .map(violation -> violation.field() + ": " + violation.description())
            .reduce((first, second) -> first + "; " + second)
            .orElseThrow();
    throw (InvalidArgumentException)
        new StatusDetails(
                Status.Code.INVALID_ARGUMENT,
                message,
                "INVALID_REQUEST",
                Map.of(),
                null,
                List.copyOf(violations),
                null)
            .toException();
  }

  /** A builder holding these options, to derive others from them. */
  public Builder toBuilder() {
    Builder builder = new Builder();
    builder.lease = lease;
    builder.attemptDuration = attemptDuration;
    builder.deadline = deadline;
    builder.lookup = lookup;
    builder.asyncLookup = asyncLookup;
    builder.providerDeduplicates = providerDeduplicates;
    builder.maxAttempts = maxAttempts;
    builder.retention = retention;
    builder.operationDeadline = operationDeadline;
    builder.lookupInterval = lookupInterval;
    builder.selector = selector;
    builder.previousFingerprints.addAll(previousFingerprints);
    return builder;
  }

  /** A builder of {@link ExecuteOptions}. */
  public static final class Builder {
    private Duration lease = Duration.ofSeconds(30);
    private Duration attemptDuration = Duration.ofMinutes(5);
    private Duration deadline = Duration.ofSeconds(60);
    private ProviderLookup lookup;
    private AsyncProviderLookup asyncLookup;
    private boolean providerDeduplicates;
    private int maxAttempts;
    private Duration retention;
    private Duration operationDeadline;
    private Duration lookupInterval = Duration.ofSeconds(1);

    private Selector selector;
    private final List<ByteString> previousFingerprints = new ArrayList<>();

    private Builder() {}

    /** The lease each Claim asks for (renewed while the effect runs); default 30 s. */
    public Builder lease(Duration lease) {
      this.lease = positive(lease, "lease");
      return this;
    }

    /**
     * The longest one attempt may run (the effect is cancelled before it); default 5 min. Fixed by
     * the scope's first Claim.
     */
    public Builder attemptDuration(Duration attemptDuration) {
      this.attemptDuration = positive(attemptDuration, "attemptDuration");
      return this;
    }

    /**
     * How long this call may spend claiming and waiting for another attempt (zero: fail with {@link
     * PendingException} at the first Pending); once it owns the operation, the attempt deadline
     * bounds it instead. Default 60 s.
     */
    public Builder deadline(Duration deadline) {
      Objects.requireNonNull(deadline, "deadline");
      if (deadline.isNegative()) {
        throw new IllegalArgumentException("deadline must not be negative");
      }
      this.deadline = deadline;
      return this;
    }

    /** On ReconcileFirst, asks the provider first (for {@link IdemdClient#executeOnce}). */
    public Builder lookup(ProviderLookup lookup) {
      this.lookup = Objects.requireNonNull(lookup, "lookup");
      return this;
    }

    /** On ReconcileFirst, asks the provider first (for {@link IdemdClient#executeOnceAsync}). */
    public Builder asyncLookup(AsyncProviderLookup lookup) {
      this.asyncLookup = Objects.requireNonNull(lookup, "lookup");
      return this;
    }

    /**
     * Declares that the provider honours the idempotency key it is given ({@link
     * EffectContext#operationId()}), so on ReconcileFirst the effect runs again with {@link
     * EffectContext#previousOutcomeUnknown()} set. Declare it only if the provider keeps keys for
     * longer than retries can come. A lookup, when given too, decides.
     */
    public Builder providerDeduplicates(boolean providerDeduplicates) {
      this.providerDeduplicates = providerDeduplicates;
      return this;
    }

    /** The attempt budget (0: the server's default). Fixed by the scope's first Claim. */
    public Builder maxAttempts(int maxAttempts) {
      if (maxAttempts < 0) {
        throw new IllegalArgumentException("maxAttempts must not be negative");
      }
      this.maxAttempts = maxAttempts;
      return this;
    }

    /** How long the result is kept for replay. Fixed by the scope's first Claim. */
    public Builder retention(Duration retention) {
      this.retention = Objects.requireNonNull(retention, "retention");
      return this;
    }

    /** No new attempt starts after this long from the first Claim. */
    public Builder operationDeadline(Duration operationDeadline) {
      this.operationDeadline = positive(operationDeadline, "operationDeadline");
      return this;
    }

    /** How often a lookup that found nothing too early is asked again; default 1 s. */
    public Builder lookupInterval(Duration lookupInterval) {
      this.lookupInterval = positive(lookupInterval, "lookupInterval");
      return this;
    }

    /**
     * The fields of a JSON payload ({@link Payload#json}) that define the request (docs/api.md,
     * "Request selectors"): a change outside them replays, one inside them is a {@link
     * ConflictException}. The selected document's fingerprint is sent instead of the payload; a
     * payload it cannot apply to (not I-JSON, or not an object while include or exclude is given)
     * throws {@link InvalidArgumentException} before any RPC. Null or empty: the whole payload.
     */
    public Builder selector(Selector selector) {
      this.selector = selector;
      return this;
    }

    /**
     * While a deployment changes how the request is normalised (a field now written out with its
     * default, a changed {@link Selector}): this same request's fingerprints under the earlier
     * normalisations, at most {@value ExecuteOptions#MAX_PREVIOUS_FINGERPRINTS} of 32 bytes each,
     * e.g. {@code oldSelector.fingerprint(json)} or {@link Fingerprints#json(String)} of the old
     * document. An operation an earlier version claimed under one of them is this request
     * (replayed, pending, resumed or taken over), not a {@link ConflictException}; every Claim of
     * the call carries them. Replaces any given before; none (the default) outside such a window.
     * Stop passing them once no operation of the old version can still be retried (its retention,
     * or its operation deadline, has passed). {@link IdemdClient#executeOnce} refuses too many, or
     * one that is not 32 bytes, with {@link InvalidArgumentException} before any RPC.
     */
    public Builder previousFingerprints(byte[]... fingerprints) {
      return previousFingerprints(Arrays.asList(fingerprints));
    }

    /** {@link #previousFingerprints(byte[]...)} from a list. */
    public Builder previousFingerprints(List<byte[]> fingerprints) {
      List<ByteString> copies = new ArrayList<>();
      for (byte[] fingerprint : fingerprints) {
        copies.add(ByteString.copyFrom(Objects.requireNonNull(fingerprint, "fingerprint")));
      }
      previousFingerprints.clear();
      previousFingerprints.addAll(copies);
      return this;
    }

    public ExecuteOptions build() {
      return new ExecuteOptions(this);
    }

    private static Duration positive(Duration value, String name) {
      Objects.requireNonNull(value, name);
      if (value.isNegative() || value.isZero()) {
        throw new IllegalArgumentException(name + " must be positive");
      }
      return value;
    }
  }
}
