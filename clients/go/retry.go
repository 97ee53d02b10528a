package idemd

import (
	"time"

	"google.golang.org/grpc/codes"
)

// RetryPolicy says how a call is re-sent. Every idemd RPC is safe to re-send
// unchanged after UNAVAILABLE or a lost reply (a Claim keeps its claim_token, owner
// writes are answered from their receipt), so:
//
//   - re-sent unchanged, with exponential backoff and full jitter, within MaxSends
//     and TotalTimeout, never sooner than the server's RetryInfo or
//     grpc-retry-pushback-ms asks: UNAVAILABLE, DEADLINE_EXCEEDED,
//     RESOURCE_EXHAUSTED (not REQUEST_TOO_LARGE), and transport failures (UNKNOWN,
//     INTERNAL or CANCELLED without idemd's ErrorInfo, e.g. a connection reset, or
//     the server's timeout of the send answering first);
//   - never re-sent: INVALID_ARGUMENT, FAILED_PRECONDITION, PERMISSION_DENIED,
//     UNAUTHENTICATED, NOT_FOUND, ABORTED (LEASE_LOST calls for a Lookup), idemd's
//     own INTERNAL, and the caller's cancellation.
//
// Each send is a call of its own and an abandoned send's reply is never read: the
// answer belongs to the send that got it.
type RetryPolicy struct {
	// MaxSends counts every send, the first included.
	MaxSends       int
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	Multiplier     float64
	// TotalTimeout: no re-send starts later than this after the first send.
	TotalTimeout time.Duration
	// CallTimeout is the gRPC deadline of each send (a Claim's wait is added).
	CallTimeout time.Duration
}

// DefaultRetryPolicy is the policy of a client made without WithRetryPolicy.
var DefaultRetryPolicy = RetryPolicy{
	MaxSends:       10,
	InitialBackoff: 50 * time.Millisecond,
	MaxBackoff:     2 * time.Second,
	Multiplier:     2,
	TotalTimeout:   30 * time.Second,
	CallTimeout:    10 * time.Second,
}

// NoRetry sends each call once.
var NoRetry = RetryPolicy{MaxSends: 1, CallTimeout: 10 * time.Second, TotalTimeout: 10 * time.Second}

// backoffCap is the backoff ceiling before re-send number resend (1-based).
func (p RetryPolicy) backoffCap(resend int) time.Duration {
	limit := float64(p.InitialBackoff)
	for i := 1; i < resend && limit < float64(p.MaxBackoff); i++ {
		limit *= p.Multiplier
	}
	return min(p.MaxBackoff, time.Duration(limit))
}

// Retryable reports whether the error is one the client re-sends unchanged.
func (err *StatusError) Retryable() bool {
	if err.Reason == ErrRequestTooLarge.reason || err.pushbackRefused {
		return false
	}
	switch err.Code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted:
		return true
	case codes.Unknown, codes.Internal:
		// From idemd these carry an ErrorInfo; without one the transport broke.
		return err.Reason == ""
	case codes.Canceled:
		// The caller's own cancellation never reaches here (send returns it as the
		// context's error). A CANCELLED status is the server's request timeout
		// (the send's grpc-timeout) answering before the client's own: a lost reply.
		return err.Reason == ""
	default:
		return false
	}
}

// retryPlan holds the re-send decisions of one call: how long each send may take,
// and after a failure whether, and after how long, it is sent again. It reads no
// clock and draws no randomness of its own, so it is tested without a server.
type retryPlan struct {
	policy       RetryPolicy
	extraTimeout time.Duration
	end          time.Time
	sends        int
	// sentAt is when the latest send began.
	sentAt time.Time
}

func newRetryPlan(policy RetryPolicy, now, deadline time.Time, extraTimeout time.Duration) *retryPlan {
	end := now.Add(policy.TotalTimeout)
	if !deadline.IsZero() && deadline.Before(end) {
		end = deadline
	}
	return &retryPlan{policy: policy, extraTimeout: extraTimeout, end: end, sentAt: now}
}

// nextTimeout is the gRPC timeout of the next send, which the caller makes at once;
// false when no time is left to make one.
func (p *retryPlan) nextTimeout(now time.Time) (time.Duration, bool) {
	remaining := p.end.Sub(now)
	if remaining <= 0 {
		return 0, false
	}
	p.sends++
	p.sentAt = now
	return min(p.policy.CallTimeout+p.extraTimeout, remaining), true
}

// delayAfter is how long to wait before re-sending after err; false when err is
// not re-sent. uniform draws from [0, limit).
func (p *retryPlan) delayAfter(err *StatusError, now time.Time, uniform func(limit time.Duration) time.Duration) (time.Duration, bool) {
	if !err.Retryable() || p.sends >= p.policy.MaxSends {
		return 0, false
	}
	delay := uniform(p.policy.backoffCap(p.sends))
	delay = max(delay, err.RetryAfter)
	if !now.Add(delay).Before(p.end) {
		return 0, false
	}
	return delay, true
}
