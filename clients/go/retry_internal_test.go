package idemd

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

func statusWith(t *testing.T, code codes.Code, details ...protoadapt.MessageV1) error {
	t.Helper()
	st, err := status.New(code, "m").WithDetails(details...)
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestStatusDetailsDecodeWithoutAServer(t *testing.T) {
	info := &errdetails.ErrorInfo{Reason: "STORE_UNAVAILABLE", Domain: Domain}
	retry := &errdetails.RetryInfo{RetryDelay: durationpb.New(200 * time.Millisecond)}
	unavailable := statusErrorOf(statusWith(t, codes.Unavailable, info, retry), nil)
	if unavailable.Code != codes.Unavailable || unavailable.RetryAfter != 200*time.Millisecond ||
		!errors.Is(unavailable, ErrStoreUnavailable) || !unavailable.Retryable() {
		t.Fatalf("unavailable: %+v", unavailable)
	}
	// The pushback trailer counts as much as RetryInfo; the longer one wins.
	pushed := statusErrorOf(statusWith(t, codes.ResourceExhausted, retry), metadata.Pairs(pushbackTrailer, "700"))
	if pushed.RetryAfter != 700*time.Millisecond || !pushed.Retryable() {
		t.Fatalf("pushback: %+v", pushed)
	}
	// gRFC A6: a negative pushback says "do not retry".
	if refused := statusErrorOf(statusWith(t, codes.Unavailable), metadata.Pairs(pushbackTrailer, "-1")); refused.Retryable() {
		t.Fatalf("a negative pushback was re-sent: %+v", refused)
	}
	tooLarge := statusErrorOf(statusWith(t, codes.ResourceExhausted, &errdetails.ErrorInfo{Reason: "REQUEST_TOO_LARGE", Domain: Domain}), nil)
	if tooLarge.Retryable() || !errors.Is(tooLarge, ErrRequestTooLarge) {
		t.Fatalf("too large: %+v", tooLarge)
	}
	bad := statusErrorOf(statusWith(t, codes.InvalidArgument,
		&errdetails.ErrorInfo{Reason: "INVALID_REQUEST", Domain: Domain},
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "scope.key", Description: "empty"}}}), nil)
	if len(bad.Violations) != 1 || bad.Violations[0].Field != "scope.key" || bad.Retryable() {
		t.Fatalf("bad request: %+v", bad)
	}
	for _, reason := range []*reasonError{ErrResultExpired, ErrLeaseStillLive, ErrAttemptStillRunning, ErrAttemptDeadlinePassed, ErrStateForbids} {
		err := statusErrorOf(statusWith(t, codes.FailedPrecondition,
			&errdetails.ErrorInfo{Reason: reason.Reason(), Domain: Domain, Metadata: map[string]string{"operation_id": "o"}}), nil)
		if !errors.Is(err, reason) || errors.Is(err, ErrLeaseLost) || err.OperationID() != "o" || err.Retryable() {
			t.Fatalf("%s: %+v", reason.Reason(), err)
		}
	}
	// A broken connection (no ErrorInfo) is re-sent; idemd's own INTERNAL is not.
	if transport := statusErrorOf(status.Error(codes.Internal, "stream reset"), nil); !transport.Retryable() || transport.Reason != "" {
		t.Fatalf("transport: %+v", transport)
	}
	// The server's own timeout of a send (tonic: CANCELLED "Timeout expired") is a
	// lost reply, never the caller's cancellation (which send returns before this).
	if timedOut := statusErrorOf(status.Error(codes.Canceled, "Timeout expired"), nil); !timedOut.Retryable() {
		t.Fatalf("the server's timeout of a send is not re-sent: %+v", timedOut)
	}
	if internal := statusErrorOf(statusWith(t, codes.Internal, &errdetails.ErrorInfo{Reason: "INTERNAL", Domain: Domain}), nil); internal.Retryable() {
		t.Fatalf("idemd's INTERNAL re-sent: %+v", internal)
	}
	for _, code := range []codes.Code{codes.InvalidArgument, codes.FailedPrecondition, codes.PermissionDenied, codes.Unauthenticated, codes.NotFound, codes.Aborted} {
		if statusErrorOf(status.Error(code, ""), nil).Retryable() {
			t.Fatalf("%s is re-sent", code)
		}
	}
}

func TestRetryPlanBacksOffWithinItsBoundsAndHonoursRetryInfo(t *testing.T) {
	policy := DefaultRetryPolicy
	start := time.Unix(1000, 0)
	plan := newRetryPlan(policy, start, time.Time{}, 5*time.Second)
	timeout, ok := plan.nextTimeout(start)
	if !ok || timeout != policy.CallTimeout+5*time.Second {
		t.Fatalf("first timeout %s", timeout)
	}
	ceiling := func(limit time.Duration) time.Duration { return limit }
	unavailable := &StatusError{Code: codes.Unavailable}
	if delay, ok := plan.delayAfter(unavailable, start, ceiling); !ok || delay != 50*time.Millisecond {
		t.Fatalf("first backoff %s", delay)
	}
	plan.nextTimeout(start)
	plan.nextTimeout(start)
	if delay, _ := plan.delayAfter(unavailable, start, ceiling); delay != 200*time.Millisecond {
		t.Fatalf("third backoff %s", delay)
	}
	// RetryInfo is a floor under the jitter.
	slow := &StatusError{Code: codes.Unavailable, RetryAfter: 1500 * time.Millisecond}
	if delay, _ := plan.delayAfter(slow, start, func(time.Duration) time.Duration { return 0 }); delay != 1500*time.Millisecond {
		t.Fatalf("RetryInfo not honoured: %s", delay)
	}
	// Nothing is re-sent when the delay would end past the plan's deadline.
	short := newRetryPlan(policy, start, start.Add(time.Second), 0)
	short.nextTimeout(start)
	if _, ok := short.delayAfter(slow, start, ceiling); ok {
		t.Fatal("re-sent past the deadline")
	}
	if timeout, _ := short.nextTimeout(start.Add(900 * time.Millisecond)); timeout != 100*time.Millisecond {
		t.Fatalf("a send outlasts the deadline: %s", timeout)
	}
	if _, ok := short.nextTimeout(start.Add(time.Second)); ok {
		t.Fatal("a send with no time left")
	}
	// At most MaxSends sends.
	once := newRetryPlan(NoRetry, start, time.Time{}, 0)
	once.nextTimeout(start)
	if _, ok := once.delayAfter(unavailable, start, ceiling); ok {
		t.Fatal("NoRetry re-sent")
	}
	if got := policy.backoffCap(20); got != policy.MaxBackoff {
		t.Fatalf("cap %s", got)
	}
}

func TestAddressesAndTokensFollowTheClientConvention(t *testing.T) {
	for addr, want := range map[string]target{
		"127.0.0.1:8080":          {hostPort: "127.0.0.1:8080"},
		"http://idemd:8080":       {hostPort: "idemd:8080", explicit: true},
		"https://idemd.example":   {hostPort: "idemd.example:443", tls: true, explicit: true},
		"https://idemd:9443/":     {hostPort: "idemd:9443", tls: true, explicit: true},
		"http://[::1]:8080":       {hostPort: "[::1]:8080", explicit: true},
		"  localhost:1234\n":      {hostPort: "localhost:1234"},
		"https://10.0.0.1:50051":  {hostPort: "10.0.0.1:50051", tls: true, explicit: true},
		"http://localhost":        {hostPort: "localhost:80", explicit: true},
		"dns:///idemd:50051":      {},
		"idemd":                   {},
		"":                        {},
		"ftp://idemd:21":          {},
		"https://idemd:1/v1/path": {},
	} {
		got, err := parseAddress(addr)
		if want.hostPort == "" {
			if err == nil {
				t.Errorf("%q accepted as %+v", addr, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%q: %+v %v, want %+v", addr, got, err, want)
		}
	}

	t.Setenv(EnvAddr, "http://from-env:1")
	t.Setenv(EnvToken, "")
	if _, err := New(); !errors.Is(err, ErrEmptyToken) {
		t.Fatalf("no token: %v", err)
	}
	if _, err := New(WithToken("")); !errors.Is(err, ErrEmptyToken) || !strings.Contains(err.Error(), EnvToken) {
		t.Fatalf("empty token: %v", err)
	}
	if _, err := New(WithToken("idem_x\n")); err == nil || !strings.Contains(err.Error(), "newline") {
		t.Fatalf("a token with a newline: %v", err)
	}
	t.Setenv(EnvToken, "idem_from_env")
	client, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if client.Conn().CanonicalTarget() != "dns:///from-env:1" {
		t.Fatalf("target %s", client.Conn().CanonicalTarget())
	}
	_ = client.Close()
	if _, err := New(WithAddress("http://idemd:1"), WithCAFile(os.DevNull)); err == nil || !strings.Contains(err.Error(), "https://") {
		t.Fatalf("TLS options on an http:// address: %v", err)
	}
	if _, err := New(WithAddress("idemd:1"), WithCAFile(os.DevNull)); err == nil || !strings.Contains(err.Error(), "no PEM") {
		t.Fatalf("an empty CA file: %v", err)
	}
	os.Unsetenv(EnvAddr)
	if _, err := New(); err == nil || !strings.Contains(err.Error(), EnvAddr) {
		t.Fatalf("no address: %v", err)
	}
}
