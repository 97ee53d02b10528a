// Package idemdhttp is net/http middleware for the IETF Idempotency-Key header,
// backed by idemd through Client.ExecuteOnce, with the Python ASGI/WSGI and the
// TypeScript Express middleware's behaviour. For the configured methods (POST and
// PATCH by default):
//
//   - no Idempotency-Key where one is required: 400;
//   - a key but no caller to scope it to (no principal), unless keys are shared: 400;
//   - the same key with another request (method, path, query, content type, body;
//     or with WithSelector, the fields it selects; while a deployment changes the
//     selector, WithPreviousSelectors keeps the old versions' requests the same), or
//     a key whose response is no longer kept: 422 (WithConflictStatus);
//   - the same key while the first request still runs: 409 with Retry-After
//     (WithInProgressStatus);
//   - the same key again: the stored response replayed (status, the kept headers,
//     body), with Idempotent-Replayed: true, without calling the handler.
//
// Refusals are RFC 9457 application/problem+json. The handler's response is
// buffered whole (at most WithMaxResponseBytes), stored, and only then sent: a
// client never sees a response that a retry would not see again. Whatever status
// the handler answers is stored, as Stripe stores its 500s; a handler that panics
// leaves the outcome unknown at idemd and the panic goes on up. A retry of that key
// never runs the handler (the attempt declines, Fail NOT_STARTED) and is answered
// 500, unless WithReconcileFirstRun declares that the handler's providers
// deduplicate by the operation id it passes them: the handler then runs again, and
// idemd.AttemptFromContext(r.Context()) tells it so (PreviousOutcomeUnknown) and
// gives it the OperationID.
//
// Keys are per caller, as Stripe scopes them per account and
// draft-ietf-httpapi-idempotency-key-header per client: idemd is sent
// ScopedKey(principal, key), so two callers who pick the same key never share an
// effect or a response. The principal defaults to the Authorization header; where a
// caller's credentials change between its retries (a refreshed short-lived token),
// name the account with WithPrincipal instead, or a retry is another caller's
// request. Scoped, a key may be at most 222 bytes.
package idemdhttp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	idemd "github.com/idemd/idemd/clients/go"
)

// DefaultKeepHeaders are the response headers stored and replayed besides
// Content-Type.
var DefaultKeepHeaders = []string{"location", "etag", "last-modified", "cache-control", "content-language", "link"}

const (
	// MaxKeyBytes is idemd's bound on a key.
	MaxKeyBytes = 255
	// PrincipalPrefixBytes is what ScopedKey puts before the header's key: 32 hex
	// digits and a colon.
	PrincipalPrefixBytes = 33
	// json_payload/bytes_payload are bounded by the server (64 KiB by default);
	// larger requests are fingerprinted here, exactly as the server would.
	maxSentPayload = 60 * 1024
	metadataLimit  = 256
	metaStatus     = "http.status"
	metaHeader     = "http.header."
)

// ScopedKey is the key sent to idemd for key sent by principal: the first 16 bytes
// of SHA-256 of the principal's UTF-8, in lower-case hex, then ":", then the key.
// The principal (a credential, often) never reaches idemd in clear, and every idemd
// client computes the same key: ScopedKey("Bearer alice", "k") is
// "9d7cce461e4b2f090a3d686b4ae72d25:k".
func ScopedKey(principal, key string) string {
	sum := sha256.Sum256([]byte(principal))
	return hex.EncodeToString(sum[:16]) + ":" + key
}

// ParseKey is the key of an Idempotency-Key header: an RFC 8941 sf-string, or a bare
// token.
func ParseKey(value string) string {
	value = strings.TrimSpace(value)
	if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
		inner := value[1 : len(value)-1]
		var out strings.Builder
		for i := 0; i < len(inner); i++ {
			if inner[i] == '\\' && i+1 < len(inner) {
				i++
			}
			out.WriteByte(inner[i])
		}
		return out.String()
	}
	return value
}

// DefaultOperation is http.<method><path> in idemd's operation alphabet, at most
// 128 characters.
func DefaultOperation(r *http.Request) string {
	path := r.URL.Path
	if path == "" {
		path = "/"
	}
	var name strings.Builder
	name.WriteString("http." + strings.ToLower(r.Method))
	for _, c := range path {
		if c < 0x80 && (c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune("._/-", c)) {
			name.WriteRune(c)
		} else {
			name.WriteByte('_')
		}
	}
	operation := name.String()
	if len(operation) > 128 {
		sum := sha256.Sum256([]byte(operation))
		operation = operation[:111] + "." + hex.EncodeToString(sum[:])[:16]
	}
	return operation
}

// AuthorizationPrincipal, the default principal, is the request's Authorization
// header ("" when it has none).
func AuthorizationPrincipal(r *http.Request) string {
	return r.Header.Get("Authorization")
}

// Option configures the middleware.
type Option func(*config)

type config struct {
	methods          map[string]bool
	required         bool
	header           string
	operation        func(*http.Request) string
	principal        func(*http.Request) string
	sharedKeys       bool
	keepHeaders      map[string]bool
	lease            time.Duration
	attemptDuration  time.Duration
	pendingWait      time.Duration
	maxRequestBytes  int64
	maxResponseBytes int64
	reconcileFirst   bool
	conflictStatus   int
	inProgress       int
	selector         *idemd.Selector
	previous         []*idemd.Selector
}

// WithMethods are the methods that need a key (default POST and PATCH); others
// pass through.
func WithMethods(methods ...string) Option {
	return func(c *config) {
		c.methods = map[string]bool{}
		for _, method := range methods {
			c.methods[strings.ToUpper(method)] = true
		}
	}
}

// WithKeyOptional lets requests without a key through, unguarded.
func WithKeyOptional() Option { return func(c *config) { c.required = false } }

// WithHeader names the key's header (default Idempotency-Key).
func WithHeader(name string) Option { return func(c *config) { c.header = name } }

// WithOperation names a request's operation (default DefaultOperation).
func WithOperation(operation func(*http.Request) string) Option {
	return func(c *config) { c.operation = operation }
}

// WithPrincipal names the caller of a request, to scope keys by (a user or account
// id from your authentication); "" is no caller, refused with 400. Default:
// AuthorizationPrincipal.
func WithPrincipal(principal func(*http.Request) string) Option {
	return func(c *config) { c.principal = principal }
}

// WithSharedKeys sends keys as they are and needs no principal: every caller of the
// routes shares one key space, which is only right for routes whose callers are one
// system.
func WithSharedKeys() Option { return func(c *config) { c.sharedKeys = true } }

// WithKeepHeaders are the response headers stored and replayed (default
// DefaultKeepHeaders); Content-Type always is.
func WithKeepHeaders(names ...string) Option {
	return func(c *config) {
		c.keepHeaders = map[string]bool{}
		for _, name := range names {
			c.keepHeaders[strings.ToLower(name)] = true
		}
	}
}

// WithLease is the lease each attempt claims (default 30 s).
func WithLease(d time.Duration) Option { return func(c *config) { c.lease = d } }

// WithAttemptDuration is the longest one handler run may take (default 5 min).
func WithAttemptDuration(d time.Duration) Option { return func(c *config) { c.attemptDuration = d } }

// WithPendingWait is how long a request for a key that is still running waits for
// it before the in-progress refusal (409 by default; default 0: at once).
func WithPendingWait(d time.Duration) Option { return func(c *config) { c.pendingWait = d } }

// WithMaxRequestBytes bounds the request body read (default 1 MiB; past it, 413).
func WithMaxRequestBytes(n int64) Option { return func(c *config) { c.maxRequestBytes = n } }

// WithMaxResponseBytes bounds the response kept (default 1 MiB, idemd's default
// result bound; past it the outcome is unknown and the answer 500).
func WithMaxResponseBytes(n int64) Option { return func(c *config) { c.maxResponseBytes = n } }

// WithConflictStatus is the status of the refusal of a key used with another request
// (method, path, query, content type, body), and of a key whose response is no longer
// kept (default 422 Unprocessable Content, as draft-ietf-httpapi-idempotency-key-header
// says); the problem+json body is the same whatever the status. A code outside
// 400..599 is a programming error: Middleware panics when it is given one.
func WithConflictStatus(code int) Option { return func(c *config) { c.conflictStatus = code } }

// WithInProgressStatus is the status of the refusal of a key whose first request still
// runs (default 409 Conflict, as draft-ietf-httpapi-idempotency-key-header says); it
// keeps its Retry-After and problem+json body whatever the status. A code outside
// 400..599 is a programming error: Middleware panics when it is given one.
func WithInProgressStatus(code int) Option { return func(c *config) { c.inProgress = code } }

// WithReconcileFirstRun declares that the handler's effects deduplicate by the
// operation id they are given (idemd.AttemptFromContext(r.Context()).OperationID),
// so after an attempt whose outcome is unknown the handler runs again instead of
// the retry being answered 500.
func WithReconcileFirstRun() Option { return func(c *config) { c.reconcileFirst = true } }

// WithSelector makes the fields of the JSON body, and the headers, that selector
// names the request's identity instead of the whole request (docs/api.md, "Request
// selectors"): a retry that changes something outside them replays, one that changes
// something inside them gets the conflict status. A body it cannot apply to (not
// I-JSON, or not an object while Include or Exclude is given) is answered 400. The
// operation (by default method and path) still scopes the key; the query and the
// content type count only when selected (a header). Make the selector with
// idemd.NewSelector (or idemd.MustSelector), which refuses one that cannot be right.
func WithSelector(selector *idemd.Selector) Option { return func(c *config) { c.selector = selector } }

// WithPreviousSelectors opens a migration window (docs/api.md, "Changing the
// normalisation while operations are in flight") while a deployment changes
// WithSelector: the selectors of the versions being replaced, at most
// idemd.MaxPreviousFingerprints. Each request's fingerprint under each of them is
// sent as a previous fingerprint, so a retry of a request an old version took (its
// response kept, or still in doubt) replays or is taken over instead of getting the
// conflict status; a request that differs under every normalisation still gets it. A
// nil or empty selector stands for a version without WithSelector, whose requests
// were the whole request (method, path, query, content type, body). A previous
// selector that cannot apply to a request (its body is not a JSON object) is left
// out: that version answered 400 and took nothing. Remove the option once the old
// versions' responses are no longer kept. None (the default) is no window.
func WithPreviousSelectors(selectors ...*idemd.Selector) Option {
	selectors = slices.Clone(selectors)
	return func(c *config) { c.previous = selectors }
}

// Middleware wraps a handler with the Idempotency-Key contract, backed by client.
//
// It panics, as http.ServeMux.Handle does for a bad pattern, when an option is a
// programming error: a WithConflictStatus or WithInProgressStatus code outside
// 400..599, or more WithPreviousSelectors than idemd.MaxPreviousFingerprints. The panic is at this call, while the server is put together, never
// while it serves.
func Middleware(client *idemd.Client, options ...Option) func(http.Handler) http.Handler {
	c := config{
		required:         true,
		header:           "Idempotency-Key",
		operation:        DefaultOperation,
		principal:        AuthorizationPrincipal,
		lease:            30 * time.Second,
		attemptDuration:  5 * time.Minute,
		maxRequestBytes:  1 << 20,
		maxResponseBytes: 1 << 20,
		conflictStatus:   http.StatusUnprocessableEntity,
		inProgress:       http.StatusConflict,
	}
	WithMethods(http.MethodPost, http.MethodPatch)(&c)
	WithKeepHeaders(DefaultKeepHeaders...)(&c)
	for _, option := range options {
		option(&c)
	}
	checkStatus("WithConflictStatus", c.conflictStatus)
	checkStatus("WithInProgressStatus", c.inProgress)
	if len(c.previous) > idemd.MaxPreviousFingerprints {
		panic(fmt.Sprintf("idemdhttp: WithPreviousSelectors: at most %d selectors, not %d", idemd.MaxPreviousFingerprints, len(c.previous)))
	}
	return func(next http.Handler) http.Handler {
		return &middleware{client: client, config: c, next: next}
	}
}

// checkStatus panics unless code is a client or server error status (400..599): a
// refusal answered 2xx or 3xx would tell the client its request was done.
func checkStatus(option string, code int) {
	if code < 400 || code > 599 {
		panic(fmt.Sprintf("idemdhttp: %s(%d): the status must be 400..599", option, code))
	}
}

type middleware struct {
	client *idemd.Client
	config
	next http.Handler
}

// maxKeyBytes is the longest header key that still fits idemd's bound once scoped.
func (m *middleware) maxKeyBytes() int {
	if m.sharedKeys {
		return MaxKeyBytes
	}
	return MaxKeyBytes - PrincipalPrefixBytes
}

var errResponseTooLarge = errors.New("idemdhttp: the response is larger than the middleware keeps")

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !m.methods[r.Method] {
		m.next.ServeHTTP(w, r)
		return
	}
	raw, present := r.Header[http.CanonicalHeaderKey(m.header)]
	if !present || len(raw) == 0 {
		if m.required {
			writeProblem(w, http.StatusBadRequest, "Idempotency-Key missing", "this request requires an Idempotency-Key header", 0)
			return
		}
		m.next.ServeHTTP(w, r)
		return
	}
	key := ParseKey(raw[0])
	if key == "" || len(key) > m.maxKeyBytes() {
		writeProblem(w, http.StatusBadRequest, "Invalid Idempotency-Key", fmt.Sprintf("the Idempotency-Key must be 1-%d bytes", m.maxKeyBytes()), 0)
		return
	}
	if !m.sharedKeys {
		principal := m.principal(r)
		if principal == "" {
			writeProblem(w, http.StatusBadRequest, "Idempotency-Key without a caller",
				"Idempotency-Keys are scoped per caller and no caller (principal) was found for this request: "+
					"send it with the caller's credentials", 0)
			return
		}
		key = ScopedKey(principal, key)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, m.maxRequestBytes+1))
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "Invalid request", "the request body could not be read", 0)
		return
	}
	if int64(len(body)) > m.maxRequestBytes {
		writeProblem(w, http.StatusRequestEntityTooLarge, "Request too large", "the request body is too large", 0)
		return
	}
	effect := func(ctx context.Context, _ *idemd.Attempt) (idemd.Outcome, error) {
		return m.runHandler(ctx, r, body)
	}
	options := []idemd.ExecuteOption{
		idemd.WithLease(m.lease),
		idemd.WithAttemptDuration(m.attemptDuration),
		idemd.WithPendingTimeout(m.pendingWait),
	}
	if m.reconcileFirst {
		options = append(options, idemd.WithProviderDeduplicates())
	}
	identity := requestIdentity(r, body)
	if !m.selector.Empty() {
		sum, err := m.selector.Fingerprint(body, selectedHeaders(r, m.selector))
		if err != nil { // not JSON, or not an object: 400
			m.answerError(w, err)
			return
		}
		identity = idemd.Fingerprint(sum)
	}
	if len(m.previous) > 0 {
		options = append(options, idemd.WithPreviousFingerprints(m.previousFingerprints(r, body)...))
	}
	result, err := m.client.ExecuteOnce(r.Context(), m.operation(r), key, identity, effect, options...)
	if err != nil {
		m.answerError(w, err)
		return
	}
	replay(w, result)
}

// requestIdentity is what the key must always be used with: method, path, query,
// content type, body (fingerprinted when too long to send).
func requestIdentity(r *http.Request, body []byte) idemd.Payload {
	framed := framedRequest(r, body)
	if len(framed) <= maxSentPayload {
		return idemd.Bytes(framed)
	}
	return idemd.Fingerprint(idemd.FingerprintBytes(framed))
}

// framedRequest is the whole request as its identity without a selector: method,
// path, query and content type as a JSON array, a newline, the body.
func framedRequest(r *http.Request, body []byte) []byte {
	path := r.URL.Path
	if path == "" {
		path = "/"
	}
	head, _ := json.Marshal([]string{strings.ToUpper(r.Method), path, r.URL.RawQuery, r.Header.Get("Content-Type")})
	return append(append(head, '\n'), body...)
}

// previousFingerprints are the request's fingerprints under the previous selectors
// that apply to it, each as that version computed it.
func (m *middleware) previousFingerprints(r *http.Request, body []byte) [][]byte {
	fingerprints := make([][]byte, 0, len(m.previous))
	for _, selector := range m.previous {
		if selector.Empty() {
			// Without a selector the request went as bytes_payload (or, too long to
			// send, its fingerprint): the server's fingerprint is this one.
			sum := idemd.FingerprintBytes(framedRequest(r, body))
			fingerprints = append(fingerprints, sum[:])
			continue
		}
		sum, err := selector.Fingerprint(body, selectedHeaders(r, selector))
		if err != nil {
			continue // that version refused this body (400) and claimed nothing
		}
		fingerprints = append(fingerprints, sum[:])
	}
	return fingerprints
}

// selectedHeaders are the request's values of the selector's headers, each name's in
// arrival order.
func selectedHeaders(r *http.Request, selector *idemd.Selector) [][2]string {
	var pairs [][2]string
	for _, name := range selector.HeaderNames() {
		for _, value := range r.Header.Values(name) {
			pairs = append(pairs, [2]string{name, value})
		}
	}
	return pairs
}

// runHandler runs the handler with the body given again and its response captured,
// and answers with the whole response as the result idemd keeps.
func (m *middleware) runHandler(ctx context.Context, r *http.Request, body []byte) (idemd.Outcome, error) {
	inner := r.Clone(ctx)
	inner.Body = io.NopCloser(bytes.NewReader(body))
	inner.ContentLength = int64(len(body))
	inner.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	captured := &capture{header: http.Header{}, limit: m.maxResponseBytes}
	m.next.ServeHTTP(captured, inner)
	if captured.tooLarge {
		return nil, errResponseTooLarge
	}
	return m.stored(captured), nil
}

// stored is the response as idemd keeps it: body and content type, the status and
// the kept headers in the metadata (within idemd's metadata limits).
func (m *middleware) stored(captured *capture) idemd.Success {
	status := captured.status
	if status == 0 {
		status = http.StatusOK
	}
	body := captured.body.Bytes()
	contentType := captured.header.Get("Content-Type")
	if _, set := captured.header["Content-Type"]; !set && len(body) > 0 {
		// What net/http itself would send.
		contentType = http.DetectContentType(body)
	}
	metadata := map[string]string{metaStatus: strconv.Itoa(status)}
	for name, values := range captured.header {
		lower := strings.ToLower(name)
		if !m.keepHeaders[lower] || lower == "content-type" {
			continue
		}
		metaKey, value := metaHeader+lower, strings.Join(values, ", ")
		if len(metaKey)+len(value) <= metadataLimit && len(metadata) < 16 {
			metadata[metaKey] = value
		}
	}
	return idemd.Success{Body: body, ContentType: contentType, Metadata: metadata}
}

// replay sends the stored response (made now or replayed).
func replay(w http.ResponseWriter, result *idemd.Result) {
	status := http.StatusOK
	if parsed, err := strconv.Atoi(result.Metadata[metaStatus]); err == nil {
		status = parsed
	}
	header := w.Header()
	for name, value := range result.Metadata {
		if after, ok := strings.CutPrefix(name, metaHeader); ok {
			header.Set(after, value)
		}
	}
	if result.ContentType != "" {
		header.Set("Content-Type", result.ContentType)
	} else {
		header["Content-Type"] = nil // no sniffing: the stored response had none
	}
	header.Set("Content-Length", strconv.Itoa(len(result.Body)))
	if result.Replayed {
		header.Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(status)
	_, _ = w.Write(result.Body)
}

// answerError is the response to an ExecuteOnce that failed. A handler's own panic
// goes on up, as it would without the middleware.
func (m *middleware) answerError(w http.ResponseWriter, err error) {
	var (
		status   *idemd.StatusError
		pending  *idemd.PendingError
		panicked *idemd.PanicError
		unknown  *idemd.OutcomeUnknownError
	)
	switch {
	case errors.Is(err, idemd.ErrIdempotencyKeyReused):
		writeProblem(w, m.conflictStatus, "Idempotency-Key reused", "this Idempotency-Key was used with a different request", 0)
	case errors.Is(err, idemd.ErrResultExpired):
		writeProblem(w, m.conflictStatus, "Idempotency-Key expired", "this Idempotency-Key's response is no longer kept; use a new key", 0)
	case errors.As(err, &pending):
		writeProblem(w, m.inProgress, "Request in progress", "a request with this Idempotency-Key is still being processed", max(pending.RetryAfter, time.Second))
	case errors.As(err, &status) && status.Code == codes.InvalidArgument:
		writeProblem(w, http.StatusBadRequest, "Invalid request", status.Message, 0)
	case errors.As(err, &panicked):
		panic(panicked.Value)
	case errors.Is(err, errResponseTooLarge):
		writeProblem(w, http.StatusInternalServerError, "Response too large", "the response is too large to keep", 0)
	case errors.As(err, &unknown) || errors.As(err, new(*idemd.NeedsReconciliationError)) || errors.As(err, new(*idemd.OperationFailedError)):
		writeProblem(w, http.StatusInternalServerError, "Outcome unknown", "an earlier attempt with this Idempotency-Key may have taken effect", 0)
	case errors.As(err, &status):
		writeProblem(w, http.StatusServiceUnavailable, "Idempotency service unavailable", codeName(status.Code), max(status.RetryAfter, time.Second))
	default:
		writeProblem(w, http.StatusInternalServerError, "Outcome unknown", "an earlier attempt with this Idempotency-Key may have taken effect", 0)
	}
}

// codeName is a gRPC code as the gRPC specification spells it (UNAVAILABLE).
func codeName(code codes.Code) string {
	var out strings.Builder
	for i, c := range code.String() {
		if i > 0 && c >= 'A' && c <= 'Z' {
			out.WriteByte('_')
		}
		out.WriteRune(c)
	}
	return strings.ToUpper(out.String())
}

type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// writeProblem sends an RFC 9457 problem details response; retryAfter, when set,
// as Retry-After in whole seconds (at least 1).
func writeProblem(w http.ResponseWriter, status int, title, detail string, retryAfter time.Duration) {
	body, _ := json.Marshal(problem{Type: "about:blank", Title: title, Status: status, Detail: detail})
	header := w.Header()
	header.Set("Content-Type", "application/problem+json")
	header.Set("Content-Length", strconv.Itoa(len(body)))
	if retryAfter > 0 {
		header.Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(retryAfter.Seconds())))))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// capture is the handler's ResponseWriter: the response is kept, never sent.
type capture struct {
	header      http.Header
	status      int
	body        bytes.Buffer
	limit       int64
	tooLarge    bool
	wroteHeader bool
}

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(status int) {
	if c.wroteHeader || status < 200 { // 1xx informational responses are not the response
		return
	}
	c.status, c.wroteHeader = status, true
}

func (c *capture) Write(p []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	if c.tooLarge || int64(c.body.Len()+len(p)) > c.limit {
		c.tooLarge = true
		return 0, errResponseTooLarge
	}
	return c.body.Write(p)
}

// Flush is a no-op: the response is sent whole once stored.
func (c *capture) Flush() {}
