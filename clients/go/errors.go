package idemd

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Domain is the ErrorInfo domain of every status idemd sends.
const Domain = "idem.v1"

// pushbackTrailer is gRPC's own retry throttle trailer (gRFC A6), which idemd sends
// with the same delay as RetryInfo on UNAVAILABLE and RESOURCE_EXHAUSTED.
const pushbackTrailer = "grpc-retry-pushback-ms"

// The ErrorInfo reasons of the proto's header comment, as sentinel errors: a
// *StatusError carrying that reason matches its sentinel with errors.Is. The reasons
// are API and stable; branch on them, never on a status message.
var (
	ErrInvalidRequest         = &reasonError{"INVALID_REQUEST"}
	ErrMissingCredentials     = &reasonError{"MISSING_CREDENTIALS"}
	ErrInvalidCredentials     = &reasonError{"INVALID_CREDENTIALS"}
	ErrOperationNotFound      = &reasonError{"OPERATION_NOT_FOUND"}
	ErrStoreUnavailable       = &reasonError{"STORE_UNAVAILABLE"}
	ErrInternal               = &reasonError{"INTERNAL"}
	ErrIdempotencyKeyReused   = &reasonError{"IDEMPOTENCY_KEY_REUSED"}
	ErrResultExpired          = &reasonError{"RESULT_EXPIRED"}
	ErrLeaseLost              = &reasonError{"LEASE_LOST"}
	ErrOperationTerminal      = &reasonError{"OPERATION_TERMINAL"}
	ErrRequestMismatch        = &reasonError{"REQUEST_MISMATCH"}
	ErrLeaseStillLive         = &reasonError{"LEASE_STILL_LIVE"}
	ErrAttemptStillRunning    = &reasonError{"ATTEMPT_STILL_RUNNING"}
	ErrAttemptDeadlinePassed  = &reasonError{"ATTEMPT_DEADLINE_PASSED"}
	ErrStateForbids           = &reasonError{"STATE_FORBIDS"}
	ErrRequestTooLarge        = &reasonError{"REQUEST_TOO_LARGE"}
	ErrRequestTimeout         = &reasonError{"REQUEST_TIMEOUT"}
	ErrOverloaded             = &reasonError{"OVERLOADED"}
	ErrTenantConcurrencyLimit = &reasonError{"TENANT_CONCURRENCY_LIMIT"}
)

// reasonError is the sentinel of one ErrorInfo reason.
type reasonError struct{ reason string }

func (e *reasonError) Error() string { return "idemd: " + e.reason }

// Reason is the ErrorInfo reason the sentinel stands for.
func (e *reasonError) Reason() string { return e.reason }

// FieldViolation is one BadRequest field violation: the field as the proto names it
// (scope.key), and why.
type FieldViolation struct {
	Field       string
	Description string
}

// StatusError is a gRPC status from idemd, decoded from its google.rpc details, or
// from the transport (then Reason is empty: the call may never have reached idemd).
// Match it with errors.As, or its reason with errors.Is and a sentinel
// (errors.Is(err, idemd.ErrLeaseLost)); status.Code(err) gives its code.
type StatusError struct {
	Code    codes.Code
	Message string
	// Reason is the ErrorInfo reason (LEASE_LOST, ...); empty when the status had
	// no ErrorInfo.
	Reason string
	// Metadata is the ErrorInfo's metadata: operation_id, and where it helps
	// state and current_fence.
	Metadata map[string]string
	// RetryAfter is the least delay before a re-send, from RetryInfo or the
	// grpc-retry-pushback-ms trailer; zero when the status carried neither.
	RetryAfter time.Duration
	// Violations are the BadRequest field violations of INVALID_ARGUMENT.
	Violations []FieldViolation
	// pushbackRefused is set when grpc-retry-pushback-ms says not to re-send.
	pushbackRefused bool
}

func (e *StatusError) Error() string {
	text := fmt.Sprintf("idemd: %s: %s", e.Code, e.Message)
	if e.Reason != "" {
		text += " (" + e.Reason + ")"
	}
	return text
}

// Is matches the sentinel of the error's reason.
func (e *StatusError) Is(target error) bool {
	sentinel, ok := target.(*reasonError)
	return ok && e.Reason != "" && sentinel.reason == e.Reason
}

// GRPCStatus makes status.Code and status.FromError see the original code.
func (e *StatusError) GRPCStatus() *status.Status {
	return status.New(e.Code, e.Message)
}

// OperationID is the ErrorInfo's operation_id (IDEMPOTENCY_KEY_REUSED through
// STATE_FORBIDS carry it), empty when absent.
func (e *StatusError) OperationID() string { return e.Metadata["operation_id"] }

// State is the operation's state as idemd named it (IN_PROGRESS, SUCCEEDED, ...).
func (e *StatusError) State() string { return e.Metadata["state"] }

// CurrentFence is the fence that refused a LEASE_LOST write; false when absent.
func (e *StatusError) CurrentFence() (uint64, bool) {
	value, ok := e.Metadata["current_fence"]
	if !ok {
		return 0, false
	}
	fence, err := strconv.ParseUint(value, 10, 64)
	return fence, err == nil
}

// statusErrorOf decodes a gRPC call's error (and the call's trailers) into a
// *StatusError. A context's own error is kept as it is, wrapped: the caller's
// cancellation is no status of idemd's.
func statusErrorOf(err error, trailer metadata.MD) *StatusError {
	var already *StatusError
	if errors.As(err, &already) {
		return already
	}
	st, ok := status.FromError(err)
	if !ok {
		return &StatusError{Code: codes.Unknown, Message: err.Error()}
	}
	decoded := &StatusError{Code: st.Code(), Message: st.Message(), Metadata: map[string]string{}}
	for _, detail := range st.Details() {
		switch d := detail.(type) {
		case *errdetails.ErrorInfo:
			if d.GetDomain() == Domain || decoded.Reason == "" {
				decoded.Reason = d.GetReason()
				decoded.Metadata = map[string]string{}
				for k, v := range d.GetMetadata() {
					decoded.Metadata[k] = v
				}
			}
		case *errdetails.RetryInfo:
			if delay := d.GetRetryDelay().AsDuration(); delay > decoded.RetryAfter {
				decoded.RetryAfter = delay
			}
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				decoded.Violations = append(decoded.Violations, FieldViolation{v.GetField(), v.GetDescription()})
			}
		}
	}
	if values := trailer.Get(pushbackTrailer); len(values) > 0 {
		// gRFC A6: a negative or unparsable pushback means "do not retry".
		ms, parseErr := strconv.ParseInt(values[0], 10, 64)
		if parseErr != nil || ms < 0 {
			decoded.pushbackRefused = true
		} else if delay := time.Duration(ms) * time.Millisecond; delay > decoded.RetryAfter {
			decoded.RetryAfter = delay
		}
	}
	return decoded
}

// ---- what ExecuteOnce answers besides gRPC statuses ----------------------------

// ErrAttemptTimeout matches an *OutcomeUnknownError whose effect was cancelled at
// the attempt deadline.
var ErrAttemptTimeout = errors.New("idemd: the effect was cancelled at the attempt deadline")

// OperationFailedError is an operation that ended with a terminal error (state
// FAILED): recorded by this call or an earlier one (Replayed).
type OperationFailedError struct {
	OperationID string
	// Reason is FAILURE_REASON_TERMINAL, _ATTEMPTS_EXHAUSTED or _DEADLINE_EXCEEDED.
	Reason   string
	Code     string
	Message  string
	Metadata map[string]string
	// Replayed is true when an earlier call stored the failure and nothing ran now.
	Replayed bool
}

func (e *OperationFailedError) Error() string {
	code := e.Code
	if code == "" {
		code = e.Reason
	}
	return fmt.Sprintf("idemd: operation %s failed: %s: %s", e.OperationID, code, e.Message)
}

// NeedsReconciliationError: the attempt budget is spent on unknown outcomes; only
// Reconcile resolves the operation. Nothing was executed.
type NeedsReconciliationError struct {
	OperationID string
	Fence       uint64
	Attempts    uint32
}

func (e *NeedsReconciliationError) Error() string {
	return fmt.Sprintf("idemd: operation %s needs reconciliation (fence %d, %d attempts); nothing was executed",
		e.OperationID, e.Fence, e.Attempts)
}

// OutcomeUnknownError: this attempt's effect may or may not have happened (idemd was
// told UNKNOWN, or could not be told), or an earlier attempt's may have and this call
// cannot check it. The next owner reconciles first; nothing is redone. Unwrap gives
// the effect's (or the lookup's) own error, if there was one.
type OutcomeUnknownError struct {
	OperationID string
	Message     string
	// TimedOut is set when the effect was cancelled at the attempt deadline
	// (errors.Is(err, ErrAttemptTimeout)).
	TimedOut bool
	Cause    error
}

func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("idemd: operation %s: %s", e.OperationID, e.Message)
}

func (e *OutcomeUnknownError) Unwrap() error { return e.Cause }

func (e *OutcomeUnknownError) Is(target error) bool {
	return target == ErrAttemptTimeout && e.TimedOut
}

// PendingError: the operation is in progress elsewhere (or its retry is not due
// yet) and the call's time to wait for it ran out. Nothing was executed.
type PendingError struct {
	OperationID string
	RetryAfter  time.Duration
	// Reason is PENDING_REASON_IN_PROGRESS or PENDING_REASON_RETRY_SCHEDULED.
	Reason string
}

func (e *PendingError) Error() string {
	return fmt.Sprintf("idemd: operation %s is pending (%s); retry after %s", e.OperationID, e.Reason, e.RetryAfter)
}

// SupersededError: another owner or a reconciler took the operation while this call
// held it, and it has not ended yet. What is stored stands; the effect is never
// redone.
type SupersededError struct {
	OperationID string
	State       string
}

func (e *SupersededError) Error() string {
	return fmt.Sprintf("idemd: operation %s was taken over; now %s", e.OperationID, e.State)
}

// UnrecognisedOutcomeError: a Claim answered an outcome this client does not know.
// Nothing was executed.
type UnrecognisedOutcomeError struct{}

func (e *UnrecognisedOutcomeError) Error() string {
	return "idemd: the Claim answered an outcome this client does not know; nothing was executed"
}

// PanicError is an effect's (or lookup's) panic, recovered so that the attempt can
// be reported UNKNOWN; Value is what it panicked with.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("idemd: the effect panicked: %v", e.Value) }
