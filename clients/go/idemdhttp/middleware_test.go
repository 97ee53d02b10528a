package idemdhttp_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	idemd "github.com/idemd/idemd/clients/go"
	"github.com/idemd/idemd/clients/go/idemdhttp"
	"github.com/idemd/idemd/clients/go/idemv1"
	"github.com/idemd/idemd/clients/go/internal/idemdtest"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The Idempotency-Key middleware in front of a small shop, against a real idemd on
// each store; the shop counts the orders it creates.

func TestMain(m *testing.M) { idemdtest.Main(m) }

func eachStore(t *testing.T, test func(t *testing.T, client *idemd.Client), serverEnv ...string) {
	t.Helper()
	t.Parallel()
	for _, store := range idemdtest.Stores {
		t.Run(string(store), func(t *testing.T) {
			t.Parallel()
			srv := idemdtest.Start(t, store, serverEnv...)
			client, err := idemd.New(idemd.WithAddress(srv.Addr), idemd.WithToken(srv.Token))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = client.Close() })
			test(t, client)
		})
	}
}

type shop struct {
	mu      sync.Mutex
	orders  []map[string]any
	hold    chan struct{}
	entered chan struct{}
	seen    []*idemd.Attempt
}

func newShop() *shop { return &shop{entered: make(chan struct{}, 100)} }

func (s *shop) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.orders)
}

func (s *shop) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		var order map[string]any
		if err := json.NewDecoder(r.Body).Decode(&order); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.entered <- struct{}{}
		if s.hold != nil {
			<-s.hold
		}
		s.mu.Lock()
		if attempt, ok := idemd.AttemptFromContext(r.Context()); ok {
			s.seen = append(s.seen, attempt)
		}
		order["id"] = fmt.Sprintf("ord_%d", len(s.orders)+1)
		s.orders = append(s.orders, order)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/orders/"+order["id"].(string))
		w.Header().Set("X-Trace", "t1")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(order)
	})
	mux.HandleFunc("GET /orders", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(s.orders)
	})
	mux.HandleFunc("POST /crash", func(http.ResponseWriter, *http.Request) {
		s.mu.Lock()
		s.orders = append(s.orders, map[string]any{"id": "crashed"})
		s.mu.Unlock()
		panic("the handler broke after its effect")
	})
	mux.HandleFunc("POST /big", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("x", 2048)))
	})
	return mux
}

func (s *shop) serve(t *testing.T, client *idemd.Client, options ...idemdhttp.Option) string {
	t.Helper()
	server := httptest.NewUnstartedServer(idemdhttp.Middleware(client, options...)(s.routes()))
	server.Config.ErrorLog = log.New(io.Discard, "", 0) // the crash route's panics
	server.Start()
	t.Cleanup(server.Close)
	return server.URL
}

const alice, bob = "Bearer alice", "Bearer bob"

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatalf("%s: %v", a.body, err)
	}
	return v
}

// post sends a request as caller (no Authorization when ""), with key as the
// Idempotency-Key header unless it is "-".
func post(t *testing.T, url, caller, key, body string) answer {
	t.Helper()
	a, err := send(url, caller, key, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func send(url, caller, key, body string) (answer, error) {
	request, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	request.Header.Set("Content-Type", "application/json")
	if caller != "" {
		request.Header.Set("Authorization", caller)
	}
	if key != "-" {
		request.Header.Set("Idempotency-Key", key)
	}
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		return answer{}, err
	}
	defer response.Body.Close()
	content, err := io.ReadAll(response.Body)
	return answer{response.StatusCode, response.Header, content}, err
}

func newKey() string { return `"` + idemdtest.Key() + `"` }

func TestReplaysTheStatusTheKeptHeadersAndTheBody(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		s := newShop()
		url := s.serve(t, client)
		key := newKey()
		first := post(t, url+"/orders", alice, key, `{"sku":"a","qty":1}`)
		again := post(t, url+"/orders", alice, key, `{"sku":"a","qty":1}`)
		if first.status != 201 || again.status != 201 || string(again.body) != string(first.body) || s.count() != 1 {
			t.Fatalf("%d %d %s %s, %d orders", first.status, again.status, first.body, again.body, s.count())
		}
		if again.header.Get("Location") != "/orders/ord_1" || first.header.Get("Location") != "/orders/ord_1" ||
			again.header.Get("Content-Type") != "application/json" {
			t.Fatalf("headers %v", again.header)
		}
		if again.header.Get("Idempotent-Replayed") != "true" || first.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("replayed %q %q", first.header.Get("Idempotent-Replayed"), again.header.Get("Idempotent-Replayed"))
		}
		if again.header.Get("X-Trace") != "" || first.header.Get("X-Trace") != "" { // not kept: not sent either
			t.Fatalf("X-Trace sent: %v", again.header)
		}
	})
}

func TestAMissingKeyIs400WhereRequiredAndPassesWhereNot(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		s := newShop()
		url := s.serve(t, client)
		refused := post(t, url+"/orders", alice, "-", `{"sku":"a"}`)
		if refused.status != 400 || refused.header.Get("Content-Type") != "application/problem+json" || refused.json(t)["title"] != "Idempotency-Key missing" {
			t.Fatalf("%d %s", refused.status, refused.body)
		}
		if empty := post(t, url+"/orders", alice, `""`, `{"sku":"a"}`); empty.status != 400 {
			t.Fatalf("an empty key: %d", empty.status)
		}
		if s.count() != 0 {
			t.Fatalf("%d orders", s.count())
		}
		optional := s.serve(t, client, idemdhttp.WithKeyOptional())
		if passed := post(t, optional+"/orders", alice, "-", `{"sku":"a"}`); passed.status != 201 || s.count() != 1 {
			t.Fatalf("%d, %d orders", passed.status, s.count())
		}
	})
}

func TestTheSameKeyWithAnotherBodyIs422(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		s := newShop()
		url := s.serve(t, client)
		key := newKey()
		if first := post(t, url+"/orders", alice, key, `{"sku":"a"}`); first.status != 201 {
			t.Fatalf("%d", first.status)
		}
		changed := post(t, url+"/orders", alice, key, `{"sku":"b"}`)
		if changed.status != 422 || changed.json(t)["title"] != "Idempotency-Key reused" || s.count() != 1 {
			t.Fatalf("%d %s, %d orders", changed.status, changed.body, s.count())
		}
	})
}

func TestAKeyStillInProgressIs409(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		s := newShop()
		s.hold = make(chan struct{})
		url := s.serve(t, client)
		key := newKey()
		done := make(chan answer, 1)
		go func() { a, _ := send(url+"/orders", alice, key, `{"sku":"a"}`); done <- a }()
		<-s.entered
		busy := post(t, url+"/orders", alice, key, `{"sku":"a"}`)
		close(s.hold)
		first := <-done
		if retryAfter, _ := strconv.Atoi(busy.header.Get("Retry-After")); busy.status != 409 || retryAfter < 1 {
			t.Fatalf("%d %v", busy.status, busy.header)
		}
		if first.status != 201 || s.count() != 1 {
			t.Fatalf("%d, %d orders", first.status, s.count())
		}
	})
}

func TestAConfiguredConflictStatusIsUsed(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		s := newShop()
		url := s.serve(t, client, idemdhttp.WithConflictStatus(http.StatusConflict))
		key := newKey()
		if first := post(t, url+"/orders", alice, key, `{"sku":"a"}`); first.status != 201 {
			t.Fatalf("%d", first.status)
		}
		changed := post(t, url+"/orders", alice, key, `{"sku":"b"}`)
		problem := changed.json(t)
		if changed.status != 409 || changed.header.Get("Content-Type") != "application/problem+json" ||
			problem["title"] != "Idempotency-Key reused" || problem["status"] != 409.0 ||
			problem["detail"] != "this Idempotency-Key was used with a different request" || s.count() != 1 {
			t.Fatalf("%d %v %s, %d orders", changed.status, changed.header, changed.body, s.count())
		}
		if changed.header.Get("Retry-After") != "" {
			t.Fatalf("a conflict with Retry-After: %v", changed.header)
		}
		// The first request is replayed as ever.
		if again := post(t, url+"/orders", alice, key, `{"sku":"a"}`); again.status != 201 || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay %d %v", again.status, again.header)
		}
	})
}

func TestAConfiguredInProgressStatusIsUsedWithRetryAfter(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		s := newShop()
		s.hold = make(chan struct{})
		url := s.serve(t, client, idemdhttp.WithInProgressStatus(http.StatusTooManyRequests))
		key := newKey()
		done := make(chan answer, 1)
		go func() { a, _ := send(url+"/orders", alice, key, `{"sku":"a"}`); done <- a }()
		<-s.entered
		busy := post(t, url+"/orders", alice, key, `{"sku":"a"}`)
		close(s.hold)
		first := <-done
		problem := busy.json(t)
		if retryAfter, _ := strconv.Atoi(busy.header.Get("Retry-After")); busy.status != 429 || retryAfter < 1 {
			t.Fatalf("%d %v", busy.status, busy.header)
		}
		if busy.header.Get("Content-Type") != "application/problem+json" || problem["title"] != "Request in progress" ||
			problem["status"] != 429.0 || problem["detail"] != "a request with this Idempotency-Key is still being processed" {
			t.Fatalf("%s", busy.body)
		}
		if first.status != 201 || s.count() != 1 {
			t.Fatalf("%d, %d orders", first.status, s.count())
		}
		// The conflict status is its own setting: another body is still 422.
		if changed := post(t, url+"/orders", alice, key, `{"sku":"b"}`); changed.status != 422 {
			t.Fatalf("conflict %d %s", changed.status, changed.body)
		}
	})
}

func TestAKeyWhoseResponseExpiredIsTheConflictStatus(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		// The first request's result, kept for no time: claimed and completed as the
		// middleware would have, then swept into a tombstone.
		ctx := context.Background()
		key := idemdtest.Key()
		scope := &idemv1.Scope{Operation: "http.post/orders", Key: idemdhttp.ScopedKey(alice, key)}
		identity := &idemv1.ClaimRequest_BytesPayload{BytesPayload: []byte(`["POST","/orders","","application/json"]` + "\n" + `{"sku":"a"}`)}
		// As short as the server allows: never below the retry window (one
		// attempt of two seconds).
		claimed, err := client.Claim(ctx, &idemv1.ClaimRequest{
			Scope: scope, RequestIdentity: identity,
			Lease: durationpb.New(time.Second), MaxAttemptDuration: durationpb.New(2 * time.Second),
			MaxAttempts: 1, Retention: durationpb.New(2 * time.Second),
		})
		if err != nil {
			t.Fatal(err)
		}
		owner := claimed.GetAcquired().GetOwnership()
		if _, err := client.Complete(ctx, &idemv1.CompleteRequest{OperationId: owner.GetOperationId(), Fence: owner.GetFence(), Result: &idemv1.Result{Body: []byte("{}")}}); err != nil {
			t.Fatal(err)
		}
		if !idemdtest.Eventually(10*time.Second, func() bool {
			_, err := client.Claim(ctx, &idemv1.ClaimRequest{Scope: scope, RequestIdentity: identity})
			return errors.Is(err, idemd.ErrResultExpired)
		}) {
			t.Fatal("the sweeper never made a tombstone")
		}
		s := newShop()
		for _, c := range []struct {
			options []idemdhttp.Option
			status  int
		}{{nil, 422}, {[]idemdhttp.Option{idemdhttp.WithConflictStatus(http.StatusGone)}, 410}} {
			expired := post(t, s.serve(t, client, c.options...)+"/orders", alice, key, `{"sku":"a"}`)
			problem := expired.json(t)
			if expired.status != c.status || problem["status"] != float64(c.status) || problem["title"] != "Idempotency-Key expired" ||
				expired.header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("want %d: %d %v %s", c.status, expired.status, expired.header, expired.body)
			}
		}
		if s.count() != 0 {
			t.Fatalf("%d orders", s.count())
		}
	}, "IDEMD_SWEEP_INTERVAL=50ms")
}

func TestAStatusOutsideTheErrorsIsRefusedWhereTheMiddlewareIsMade(t *testing.T) {
	t.Parallel()
	made := func(option idemdhttp.Option) (refusal any) {
		defer func() { refusal = recover() }()
		idemdhttp.Middleware(nil, option)
		return nil
	}
	for _, bad := range []struct {
		option idemdhttp.Option
		name   string
	}{
		{idemdhttp.WithConflictStatus(200), "WithConflictStatus(200)"},
		{idemdhttp.WithConflictStatus(399), "WithConflictStatus(399)"},
		{idemdhttp.WithConflictStatus(600), "WithConflictStatus(600)"},
		{idemdhttp.WithConflictStatus(0), "WithConflictStatus(0)"},
		{idemdhttp.WithInProgressStatus(302), "WithInProgressStatus(302)"},
		{idemdhttp.WithInProgressStatus(-409), "WithInProgressStatus(-409)"},
		{idemdhttp.WithInProgressStatus(4090), "WithInProgressStatus(4090)"},
	} {
		refusal, _ := made(bad.option).(string)
		if !strings.Contains(refusal, bad.name) || !strings.Contains(refusal, "400..599") {
			t.Errorf("%s: %q", bad.name, refusal)
		}
	}
	for _, good := range []idemdhttp.Option{
		idemdhttp.WithConflictStatus(400), idemdhttp.WithConflictStatus(599),
		idemdhttp.WithInProgressStatus(400), idemdhttp.WithInProgressStatus(599),
	} {
		if refusal := made(good); refusal != nil {
			t.Errorf("refused: %v", refusal)
		}
	}
}

func TestOnlyTheConfiguredMethodsNeedAKey(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		s := newShop()
		url := s.serve(t, client)
		if response, err := http.Get(url + "/orders"); err != nil || response.StatusCode != 200 {
			t.Fatalf("%v %v", response, err)
		}
		patchOnly := s.serve(t, client, idemdhttp.WithMethods("PATCH"))
		post(t, patchOnly+"/orders", alice, "-", `{"sku":"a"}`)
		post(t, patchOnly+"/orders", alice, "-", `{"sku":"a"}`)
		if s.count() != 2 {
			t.Fatalf("%d orders", s.count())
		}
	})
}

func TestAHandlerThatPanicsIsUnknownAndNeverRunAgain(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		s := newShop()
		url := s.serve(t, client)
		key := newKey()
		// The panic goes on up: net/http drops the connection, as without the
		// middleware.
		if crashed, err := send(url+"/crash", alice, key, `{}`); err == nil {
			t.Fatalf("the panic was answered %d", crashed.status)
		}
		retried := post(t, url+"/crash", alice, key, `{}`)
		if retried.status != 500 || retried.header.Get("Content-Type") != "application/problem+json" || retried.json(t)["title"] != "Outcome unknown" {
			t.Fatalf("%d %s", retried.status, retried.body)
		}
		if s.count() != 1 {
			t.Fatalf("the handler ran %d times", s.count())
		}
		// The retry declined (the handler never ran), keeping the crashed attempt's doubt.
		sent := idemdhttp.ScopedKey(alice, idemdhttp.ParseKey(key))
		found, err := client.Lookup(context.Background(), &idemv1.LookupRequest{
			Target:         &idemv1.LookupRequest_Scope{Scope: &idemv1.Scope{Operation: "http.post/crash", Key: sent}},
			IncludeHistory: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		var events []string
		for _, entry := range found.GetHistory() {
			if entry.GetEvent() != "RENEWED" {
				events = append(events, entry.GetEvent()+":"+entry.GetDetail())
			}
		}
		if len(events) != 4 || !strings.HasPrefix(events[0], "CLAIMED") || !strings.HasPrefix(events[1], "OUTCOME_UNKNOWN:effect_raised") ||
			!strings.HasPrefix(events[2], "TAKEN_OVER") || events[3] != "OUTCOME_UNKNOWN:not_started" {
			t.Fatalf("history %v", events)
		}
	})
}

// WithReconcileFirstRun: the handler's providers deduplicate by the operation id it
// is given, so after a crash the retry runs the handler again, told so.
func TestReconcileFirstRunDeclaresDeduplicationAndRunsTheHandlerAgain(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		var mu sync.Mutex
		var seen []idemd.Attempt
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			attempt, _ := idemd.AttemptFromContext(r.Context())
			mu.Lock()
			seen = append(seen, *attempt)
			first := len(seen) == 1
			mu.Unlock()
			if first {
				panic(http.ErrAbortHandler)
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, `{"reference":%q}`, attempt.OperationID)
		})
		server := httptest.NewServer(idemdhttp.Middleware(client, idemdhttp.WithReconcileFirstRun())(handler))
		defer server.Close()
		key := newKey()
		if _, err := send(server.URL+"/orders", alice, key, `{}`); err == nil {
			t.Fatal("the aborted handler was answered")
		}
		retried := post(t, server.URL+"/orders", alice, key, `{}`)
		if retried.status != 201 || len(seen) != 2 || seen[0].PreviousOutcomeUnknown || !seen[1].PreviousOutcomeUnknown ||
			retried.json(t)["reference"] != seen[0].OperationID {
			t.Fatalf("%d %s, seen %+v", retried.status, retried.body, seen)
		}
	})
}

func TestKeysArePerCaller(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		s := newShop()
		url := s.serve(t, client)
		key := newKey()
		alices := post(t, url+"/orders", alice, key, `{"sku":"a"}`)
		bobs := post(t, url+"/orders", bob, key, `{"sku":"a"}`)
		again := post(t, url+"/orders", alice, key, `{"sku":"a"}`)
		if alices.status != 201 || bobs.status != 201 || again.status != 201 || s.count() != 2 {
			t.Fatalf("%d %d %d, %d orders", alices.status, bobs.status, again.status, s.count())
		}
		if alices.json(t)["id"] == bobs.json(t)["id"] || bobs.header.Get("Idempotent-Replayed") != "" ||
			string(again.body) != string(alices.body) || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("alice %s, bob %s, alice again %s", alices.body, bobs.body, again.body)
		}
	})
}

func TestAKeyWithoutACallerIsRefusedUnlessKeysAreShared(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		s := newShop()
		key := newKey()
		refused := post(t, s.serve(t, client)+"/orders", "", key, `{"sku":"a"}`)
		problem := refused.json(t)
		if refused.status != 400 || refused.header.Get("Content-Type") != "application/problem+json" ||
			problem["title"] != "Idempotency-Key without a caller" || !strings.Contains(problem["detail"].(string), "scoped per caller") ||
			problem["status"] != float64(400) || problem["type"] != "about:blank" || s.count() != 0 {
			t.Fatalf("%d %s", refused.status, refused.body)
		}
		// Shared keys: one key space for every caller of the route, the key sent as it is.
		shared := s.serve(t, client, idemdhttp.WithSharedKeys())
		served := post(t, shared+"/orders", "", key, `{"sku":"a"}`)
		bobs := post(t, shared+"/orders", bob, key, `{"sku":"a"}`)
		if served.status != 201 || bobs.status != 201 || s.count() != 1 || string(bobs.body) != string(served.body) || bobs.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%d %d, %d orders", served.status, bobs.status, s.count())
		}
		found, err := client.Lookup(context.Background(), &idemv1.LookupRequest{Target: &idemv1.LookupRequest_Scope{
			Scope: &idemv1.Scope{Operation: "http.post/orders", Key: idemdhttp.ParseKey(key)},
		}})
		if err != nil || found.GetOperation().GetState() != idemv1.OperationState_OPERATION_STATE_SUCCEEDED {
			t.Fatalf("%v %v", found, err)
		}
	})
}

func TestAPrincipalFunctionNamesTheCaller(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		s := newShop()
		url := s.serve(t, client, idemdhttp.WithPrincipal(func(r *http.Request) string { return r.Header.Get("X-User") }))
		key := newKey()
		asUser := func(user string) int {
			request, _ := http.NewRequest(http.MethodPost, url+"/orders", strings.NewReader(`{"sku":"a"}`))
			request.Header.Set("Idempotency-Key", key)
			if user != "" {
				request.Header.Set("X-User", user)
			} else {
				request.Header.Set("Authorization", alice)
			}
			response, err := http.DefaultClient.Do(request)
			if err != nil {
				t.Fatal(err)
			}
			response.Body.Close()
			return response.StatusCode
		}
		// Credentials alone name no caller for this function.
		if u1, u2, alices := asUser("u1"), asUser("u2"), asUser(""); u1 != 201 || u2 != 201 || alices != 400 || s.count() != 2 {
			t.Fatalf("%d %d %d, %d orders", u1, u2, alices, s.count())
		}
	})
}

func TestTheMiddlewareSendsTheScopedKeyWithinIdemdsBound(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		s := newShop()
		url := s.serve(t, client)
		key := idemdtest.Key()
		if first := post(t, url+"/orders", alice, key, `{"sku":"a"}`); first.status != 201 {
			t.Fatalf("%d", first.status)
		}
		// 33 bytes of the 255 go to the caller's prefix.
		longest := post(t, url+"/orders", alice, strings.Repeat("k", 222), `{"sku":"a"}`)
		tooLong := post(t, url+"/orders", alice, strings.Repeat("k", 223), `{"sku":"a"}`)
		if longest.status != 201 || tooLong.status != 400 || !strings.Contains(tooLong.json(t)["detail"].(string), "1-222 bytes") || s.count() != 2 {
			t.Fatalf("%d %d %s", longest.status, tooLong.status, tooLong.body)
		}
		found, err := client.Lookup(context.Background(), &idemv1.LookupRequest{Target: &idemv1.LookupRequest_Scope{
			Scope: &idemv1.Scope{Operation: "http.post/orders", Key: "9d7cce461e4b2f090a3d686b4ae72d25:" + key},
		}})
		if err != nil || found.GetOperation().GetState() != idemv1.OperationState_OPERATION_STATE_SUCCEEDED {
			t.Fatalf("%v %v", found, err)
		}
		shared := s.serve(t, client, idemdhttp.WithSharedKeys())
		if longest, tooLong := post(t, shared+"/orders", alice, strings.Repeat("k", 255), `{"sku":"a"}`),
			post(t, shared+"/orders", alice, strings.Repeat("k", 256), `{"sku":"a"}`); longest.status != 201 || tooLong.status != 400 {
			t.Fatalf("%d %d", longest.status, tooLong.status)
		}
	})
}

func TestBodiesPastTheLimitsAreRefused(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		s := newShop()
		url := s.serve(t, client, idemdhttp.WithMaxRequestBytes(64), idemdhttp.WithMaxResponseBytes(1024))
		if large := post(t, url+"/orders", alice, newKey(), `{"sku":"`+strings.Repeat("a", 100)+`"}`); large.status != 413 || s.count() != 0 {
			t.Fatalf("%d, %d orders", large.status, s.count())
		}
		big := post(t, url+"/big", alice, newKey(), `{}`)
		if big.status != 500 || big.json(t)["title"] != "Response too large" {
			t.Fatalf("%d %s", big.status, big.body)
		}
	})
}

// A request larger than idemd takes as a payload is fingerprinted locally, and
// still the same request the second time.
func TestALargeRequestIsFingerprintedLocally(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		s := newShop()
		url := s.serve(t, client)
		key := newKey()
		body := `{"sku":"` + strings.Repeat("a", 70*1024) + `"}`
		first := post(t, url+"/orders", alice, key, body)
		again := post(t, url+"/orders", alice, key, body)
		changed := post(t, url+"/orders", alice, key, body[:len(body)-3]+`b"}`)
		if first.status != 201 || again.status != 201 || again.header.Get("Idempotent-Replayed") != "true" || changed.status != 422 || s.count() != 1 {
			t.Fatalf("%d %d %d, %d orders", first.status, again.status, changed.status, s.count())
		}
	})
}

func TestKeyOperationAndScopedKeyForms(t *testing.T) {
	if got := idemdhttp.ParseKey(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`); got != "8e03978e-40d5-43e8-bc93-6894a57f9324" {
		t.Fatal(got)
	}
	if idemdhttp.ParseKey(`"a\"b"`) != `a"b` || idemdhttp.ParseKey("bare") != "bare" {
		t.Fatal("sf-string escapes")
	}
	request := httptest.NewRequest(http.MethodPost, "/orders/%7Bx%7D%20y", nil)
	if got := idemdhttp.DefaultOperation(request); got != "http.post/orders/_x__y" {
		t.Fatal(got)
	}
	long := httptest.NewRequest(http.MethodPost, "/"+strings.Repeat("a", 300), nil)
	if got := idemdhttp.DefaultOperation(long); len(got) != 128 {
		t.Fatal(got)
	}
	// hex(SHA-256(UTF-8 principal))[0:32] + ":" + key, the same in every client.
	sum := sha256.Sum256([]byte("Bearer alice"))
	if prefix := hex.EncodeToString(sum[:])[:32]; prefix != "9d7cce461e4b2f090a3d686b4ae72d25" ||
		idemdhttp.ScopedKey("Bearer alice", "order-1") != "9d7cce461e4b2f090a3d686b4ae72d25:order-1" {
		t.Fatal(prefix)
	}
	withAuth := httptest.NewRequest(http.MethodPost, "/", nil)
	withAuth.Header.Set("Authorization", "Bearer alice")
	if idemdhttp.AuthorizationPrincipal(withAuth) != "Bearer alice" || idemdhttp.AuthorizationPrincipal(request) != "" {
		t.Fatal("the default principal")
	}
}

// sendWith is send with extra request headers.
func sendWith(t *testing.T, url, key, body string, headers map[string]string) answer {
	t.Helper()
	request, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	request.Header.Set("Content-Type", "application/json")
	request.Header.Set("Authorization", alice)
	request.Header.Set("Idempotency-Key", key)
	for name, value := range headers {
		request.Header.Set(name, value)
	}
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		t.Fatal(err)
	}
	defer response.Body.Close()
	content, err := io.ReadAll(response.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{response.StatusCode, response.Header, content}
}

func TestASelectorReplaysChangesOutsideItAndRefusesChangesInside(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		s := newShop()
		selector := idemd.MustSelector(idemd.SelectorFields{Include: []string{"/sku"}, Headers: []string{"X-Tenant"}})
		url := s.serve(t, client, idemdhttp.WithSelector(selector))
		key := newKey()
		tenant := map[string]string{"X-Tenant": "t1"}
		first := sendWith(t, url+"/orders", key, `{"sku":"a","note":"one"}`, tenant)
		outside := sendWith(t, url+"/orders?page=2", key, `{"note":"two","sku":"a"}`, tenant)
		if first.status != 201 || outside.status != 201 || outside.header.Get("Idempotent-Replayed") != "true" ||
			string(outside.body) != string(first.body) {
			t.Fatalf("%d %s; %d %s", first.status, first.body, outside.status, outside.body)
		}
		inside := sendWith(t, url+"/orders", key, `{"sku":"b","note":"one"}`, tenant)
		otherTenant := sendWith(t, url+"/orders", key, `{"sku":"a","note":"one"}`, map[string]string{"X-Tenant": "t2"})
		if inside.status != 422 || otherTenant.status != 422 {
			t.Fatalf("inside %d, other tenant %d", inside.status, otherTenant.status)
		}
		notAnObject := sendWith(t, url+"/orders", newKey(), `["a"]`, nil)
		if notAnObject.status != 400 || notAnObject.header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%d %s", notAnObject.status, notAnObject.body)
		}
		if s.count() != 1 {
			t.Fatalf("%d orders", s.count())
		}
	})
}
