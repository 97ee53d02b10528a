package idemd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	idemv1 "github.com/idemd/idemd/clients/go/idemv1"
)

// Outcome is what an effect reports: Success, Terminal, Retryable or Unknown. An
// effect that returns an error (or panics) counts as Unknown.
type Outcome interface{ isOutcome() }

// Success: the effect happened; Body is recorded (Complete) and replayed to retries.
type Success struct {
	Body        []byte
	ContentType string
	// Metadata: at most 16 entries of at most 256 bytes (key and value) each.
	Metadata map[string]string
}

// Terminal: the effect ended in a final error, recorded (Fail TERMINAL) and replayed
// to retries as an *OperationFailedError.
type Terminal struct {
	Code     string
	Message  string
	Metadata map[string]string
}

// Retryable: the effect certainly did not happen, so a later attempt may try again
// (Fail RETRYABLE) after RetryAfter (zero: the server's default, 1 s), within the
// attempt budget.
type Retryable struct {
	Code       string
	Message    string
	RetryAfter time.Duration
	Metadata   map[string]string
}

// Unknown: the effect may or may not have happened (Fail UNKNOWN); the next owner
// reconciles first.
type Unknown struct {
	Code    string
	Message string
}

func (Success) isOutcome()   {}
func (Terminal) isOutcome()  {}
func (Retryable) isOutcome() {}
func (Unknown) isOutcome()   {}

// outcomeValue is o with a pointer (&Success{...}) read as its value; nil when o is
// nil or a nil pointer.
func outcomeValue(o Outcome) Outcome {
	switch v := o.(type) {
	case *Success:
		if v != nil {
			return *v
		}
		return nil
	case *Terminal:
		if v != nil {
			return *v
		}
		return nil
	case *Retryable:
		if v != nil {
			return *v
		}
		return nil
	case *Unknown:
		if v != nil {
			return *v
		}
		return nil
	}
	return o
}

// Result is the operation's recorded result, made now or replayed.
type Result struct {
	OperationID string
	Body        []byte
	ContentType string
	Metadata    map[string]string
	// Attempts the operation took, this one included.
	Attempts uint32
	// Replayed is true when an earlier call stored the result and nothing ran now.
	Replayed bool
}

// JSON decodes the result's body into v.
func (r *Result) JSON(v any) error { return json.Unmarshal(r.Body, v) }

// Attempt is what the effect (and the lookup) learn about the attempt they run in.
// The context they are given carries its cancel point as its deadline, and is
// cancelled early when the lease is lost.
type Attempt struct {
	// OperationID is stable for the whole operation: give it to the provider as its
	// idempotency key.
	OperationID string
	Fence       uint64
	// Number is 1-based and counts every owner, takeovers included.
	Number      uint32
	MaxAttempts uint32
	// PreviousOutcomeUnknown is set on ReconcileFirst: an earlier attempt may have
	// taken effect.
	PreviousOutcomeUnknown bool
	PreviousFence          uint64
	// PreviousAttemptDeadline is the server's previous_attempt_deadline (what was
	// left of the earlier attempt when it answered); HasPreviousAttemptDeadline is
	// false when an older server left it out.
	PreviousAttemptDeadline    time.Duration
	HasPreviousAttemptDeadline bool
	// PreviousAttemptSettlesAt is when the earlier attempt's effect is no longer in
	// flight (counted from the Claim's reply; a whole attempt duration when the
	// server sent no deadline). Zero without a previous attempt.
	PreviousAttemptSettlesAt time.Time
	// CancelAt is when the effect is cancelled: its context's deadline.
	CancelAt time.Time
}

// PreviousAttemptSettled reports whether the earlier attempt's effect was no longer
// in flight at the instant at. A provider read that finds nothing proves something
// only if it started after that: pass the instant taken just before the read.
func (a *Attempt) PreviousAttemptSettled(at time.Time) bool {
	return a.PreviousAttemptSettlesAt.IsZero() || !at.Before(a.PreviousAttemptSettlesAt)
}

type attemptKey struct{}

// AttemptFromContext is the Attempt an effect's (or a lookup's, or an HTTP
// handler's under idemdhttp) context runs in; false outside one.
func AttemptFromContext(ctx context.Context) (*Attempt, bool) {
	attempt, ok := ctx.Value(attemptKey{}).(*Attempt)
	return attempt, ok
}

// Effect is the business effect ExecuteOnce runs at most once. It should pass
// attempt.OperationID to its provider as the idempotency key and stop when ctx is
// done. An error (or a panic) means its outcome is unknown.
type Effect func(ctx context.Context, attempt *Attempt) (Outcome, error)

// Lookup asks the provider, on ReconcileFirst, whether an earlier attempt's effect
// happened: a Success or Terminal with what the provider reports, or nil when it has
// nothing. It must read the provider's current state (not a cache, not a lagging
// replica). An error means this call cannot tell: the attempt declines.
type Lookup func(ctx context.Context, attempt *Attempt) (Outcome, error)

// Payload identifies the request: the same key with another payload is
// IDEMPOTENCY_KEY_REUSED, never a replay.
type Payload struct {
	set    func(*idemv1.ClaimRequest)
	err    error
	nonNil bool
	// document is the JSON text of JSON and JSONText payloads, which a selector
	// (WithSelector) applies to.
	document *string
}

// JSON is v marshalled with encoding/json, sent as a JSON document (the server
// fingerprints its RFC 8785 form, so key order and spacing do not matter).
func JSON(v any) Payload {
	document, err := json.Marshal(v)
	if err != nil {
		return Payload{err: fmt.Errorf("idemd: the payload: %w", err), nonNil: true}
	}
	return JSONText(string(document))
}

// JSONText is a JSON document as it is.
func JSONText(document string) Payload {
	return Payload{nonNil: true, document: &document, set: func(r *idemv1.ClaimRequest) {
		r.RequestIdentity = &idemv1.ClaimRequest_JsonPayload{JsonPayload: document}
	}}
}

// Bytes are opaque bytes, fingerprinted as given.
func Bytes(payload []byte) Payload {
	return Payload{nonNil: true, set: func(r *idemv1.ClaimRequest) {
		r.RequestIdentity = &idemv1.ClaimRequest_BytesPayload{BytesPayload: payload}
	}}
}

// Fingerprint is a fingerprint computed locally (FingerprintJSON, FingerprintBytes),
// for requests larger than the server takes as a payload.
func Fingerprint(sum [32]byte) Payload {
	return Payload{nonNil: true, set: func(r *idemv1.ClaimRequest) {
		r.RequestIdentity = &idemv1.ClaimRequest_Fingerprint{Fingerprint: sum[:]}
	}}
}

// ExecuteOption configures ExecuteOnce.
type ExecuteOption func(*executeConfig)

type executeConfig struct {
	lease                time.Duration
	attemptDuration      time.Duration
	pendingTimeout       time.Duration
	lookup               Lookup
	providerDeduplicates bool
	maxAttempts          uint32
	retention            *time.Duration
	operationDeadline    *time.Duration
	lookupInterval       time.Duration
	selector             *Selector
	previousFingerprints [][]byte
}

func defaultExecuteConfig() executeConfig {
	return executeConfig{
		lease:           30 * time.Second,
		attemptDuration: 5 * time.Minute,
		pendingTimeout:  time.Minute,
		lookupInterval:  time.Second,
	}
}

// WithSelector names the fields of a JSON payload (JSON, JSONText) that define the
// request (docs/api.md, "Request selectors"): a change outside them replays, one
// inside them is IDEMPOTENCY_KEY_REUSED. The selected document's fingerprint is sent
// instead of the payload; a payload the selector cannot apply to (not I-JSON, or not
// an object while Include or Exclude is given) fails with a *StatusError matching
// ErrInvalidRequest before any RPC. A nil or empty selector is the whole payload.
func WithSelector(selector *Selector) ExecuteOption {
	return func(c *executeConfig) { c.selector = selector }
}

// MaxPreviousFingerprints is the most previous fingerprints a Claim may carry.
const MaxPreviousFingerprints = 4

// WithPreviousFingerprints opens a migration window (docs/api.md, "Changing the
// normalisation while operations are in flight"): the request's 32-byte fingerprints
// under the normalisations of the versions being replaced (at most
// MaxPreviousFingerprints), e.g. oldSelector.Fingerprint(body, nil), or
// FingerprintJSON of the payload as the old version wrote it. An operation a previous
// version claimed under one of them is this same request (replayed, resumed or taken
// over), not IDEMPOTENCY_KEY_REUSED; a request that matches none still conflicts.
// Every Claim of the call carries them, re-sends included. More than
// MaxPreviousFingerprints, or one that is not 32 bytes, fails with a *StatusError
// matching ErrInvalidRequest before any RPC, as the server would refuse it. Stop
// passing them once no operation of the old version can still be retried (its
// retention or operation deadline has passed). None (the default) is no window.
func WithPreviousFingerprints(fingerprints ...[]byte) ExecuteOption {
	// Copied now: the caller may reuse its slices while a call runs.
	copies := make([][]byte, 0, len(fingerprints))
	for _, fingerprint := range fingerprints {
		copies = append(copies, bytes.Clone(fingerprint))
	}
	return func(c *executeConfig) { c.previousFingerprints = copies }
}

// checkPreviousFingerprints refuses, as the server would, previous fingerprints it
// would refuse, naming the field the server names.
func checkPreviousFingerprints(fingerprints [][]byte) error {
	if len(fingerprints) > MaxPreviousFingerprints {
		return invalidArgument("previous_fingerprints",
			fmt.Sprintf("at most %d previous fingerprints, not %d", MaxPreviousFingerprints, len(fingerprints)))
	}
	for i, fingerprint := range fingerprints {
		if len(fingerprint) != sha256.Size {
			return invalidArgument(fmt.Sprintf("previous_fingerprints[%d]", i),
				fmt.Sprintf("a fingerprint is %d bytes, not %d", sha256.Size, len(fingerprint)))
		}
	}
	return nil
}

// WithLease is the lease each attempt claims (default 30 s).
func WithLease(d time.Duration) ExecuteOption { return func(c *executeConfig) { c.lease = d } }

// WithAttemptDuration is the longest one attempt may run (default 5 min; fixed by
// the scope's first Claim). The effect is cancelled before it.
func WithAttemptDuration(d time.Duration) ExecuteOption {
	return func(c *executeConfig) { c.attemptDuration = d }
}

// WithPendingTimeout bounds the time spent claiming and waiting for another attempt
// of the same operation (default 1 min; 0: a *PendingError at the first Pending).
// The context's deadline bounds it too. Once this call owns the operation, the
// attempt deadline bounds it instead.
func WithPendingTimeout(d time.Duration) ExecuteOption {
	return func(c *executeConfig) { c.pendingTimeout = d }
}

// WithLookup is asked first on ReconcileFirst (an earlier attempt may have taken
// effect). What it finds is recorded at once; "nothing" counts only from a lookup
// that started once the earlier attempt settled (Attempt.PreviousAttemptSettlesAt):
// until then it is asked again every lookup interval, and an attempt that would end
// first declines (Fail NOT_STARTED) and claims again. With WithProviderDeduplicates
// as well, the lookup decides.
func WithLookup(lookup Lookup) ExecuteOption { return func(c *executeConfig) { c.lookup = lookup } }

// WithProviderDeduplicates declares that the provider honours the idempotency key it
// is given (Attempt.OperationID), so on ReconcileFirst the effect runs again, with
// Attempt.PreviousOutcomeUnknown set, and a repeat returns the earlier effect
// instead of making a second one. Declare it only if the provider keeps keys for
// longer than your retries can come. Without it (or WithLookup) the effect never
// runs on ReconcileFirst: the attempt declines and the call fails with an
// *OutcomeUnknownError.
func WithProviderDeduplicates() ExecuteOption {
	return func(c *executeConfig) { c.providerDeduplicates = true }
}

// WithMaxAttempts is the attempt budget (fixed by the scope's first Claim; 0: the
// server's default, 5).
func WithMaxAttempts(n uint32) ExecuteOption { return func(c *executeConfig) { c.maxAttempts = n } }

// WithRetention is how long the result is kept for replay (fixed by the first Claim).
func WithRetention(d time.Duration) ExecuteOption {
	return func(c *executeConfig) { c.retention = &d }
}

// WithOperationDeadline: no new attempt starts this long after the first Claim
// (fixed by the first Claim).
func WithOperationDeadline(d time.Duration) ExecuteOption {
	return func(c *executeConfig) { c.operationDeadline = &d }
}

// WithLookupInterval is how often a lookup that found nothing too early is asked
// again (default 1 s).
func WithLookupInterval(d time.Duration) ExecuteOption {
	return func(c *executeConfig) { c.lookupInterval = d }
}
