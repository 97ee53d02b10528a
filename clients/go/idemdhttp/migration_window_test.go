package idemdhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	idemd "github.com/idemd/idemd/clients/go"
	"github.com/idemd/idemd/clients/go/idemdhttp"
	"github.com/idemd/idemd/clients/go/idemv1"
)

// A rolling deployment that changes the selector (docs/api.md, "Changing the
// normalisation while operations are in flight"): the old version identified a
// charge by its amount alone, the new one by amount and currency, so the same
// request has a new fingerprint. The new version lists the old selector in
// WithPreviousSelectors. Both versions run in front of one ledger, which counts
// charges.

type ledger struct{ charges atomic.Int32 }

// handler makes a charge; dying, it is a pod of the old version that goes down
// mid-request, before its charge.
func (l *ledger) handler(dying bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dying {
			panic(http.ErrAbortHandler)
		}
		var charge map[string]any
		if err := json.NewDecoder(r.Body).Decode(&charge); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		charge["id"] = fmt.Sprintf("ch_%d", l.charges.Add(1))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(charge)
	})
}

func version(t *testing.T, client *idemd.Client, handler http.Handler, options ...idemdhttp.Option) string {
	t.Helper()
	server := httptest.NewServer(idemdhttp.Middleware(client, options...)(handler))
	t.Cleanup(server.Close)
	return server.URL + "/charges"
}

var (
	amountOnly        = idemd.MustSelector(idemd.SelectorFields{Include: []string{"/amount"}})
	amountAndCurrency = idemd.MustSelector(idemd.SelectorFields{Include: []string{"/amount", "/currency"}})
)

func TestARollingDeploymentOfANewSelectorReplaysAndTakesOver(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		l := &ledger{}
		old := version(t, client, l.handler(false), idemdhttp.WithSelector(amountOnly))
		oldDying := version(t, client, l.handler(true), idemdhttp.WithSelector(amountOnly))
		unprepared := version(t, client, l.handler(false), idemdhttp.WithSelector(amountAndCurrency), idemdhttp.WithReconcileFirstRun())
		next := version(t, client, l.handler(false), idemdhttp.WithSelector(amountAndCurrency), idemdhttp.WithReconcileFirstRun(),
			idemdhttp.WithPreviousSelectors(amountOnly))
		charge := `{"amount":100,"currency":"EUR","note":"first"}`

		// Answered by the old version; retried through the new one.
		done := newKey()
		first := post(t, old, alice, done, charge)
		if first.status != 201 || l.charges.Load() != 1 {
			t.Fatalf("%d %s", first.status, first.body)
		}
		if falseConflict := post(t, unprepared, alice, done, charge); falseConflict.status != 422 {
			t.Fatalf("without the window: %d %s", falseConflict.status, falseConflict.body)
		}
		replayed := post(t, next, alice, done, charge)
		if replayed.status != 201 || replayed.header.Get("Idempotent-Replayed") != "true" || string(replayed.body) != string(first.body) {
			t.Fatalf("%d %s", replayed.status, replayed.body)
		}

		// The old version's pod died mid-request: the new version takes it over and
		// its handler charges once; the history says the old selector matched.
		doubted := newKey()
		if _, err := send(oldDying, alice, doubted, charge); err == nil {
			t.Fatal("the dying pod answered")
		}
		if falseConflict := post(t, unprepared, alice, doubted, charge); falseConflict.status != 422 {
			t.Fatalf("without the window: %d %s", falseConflict.status, falseConflict.body)
		}
		taken := post(t, next, alice, doubted, charge)
		if taken.status != 201 || taken.header.Get("Idempotent-Replayed") != "" || l.charges.Load() != 2 {
			t.Fatalf("%d %s, %d charges", taken.status, taken.body, l.charges.Load())
		}
		if detail := takeoverDetail(t, client, doubted); !strings.HasSuffix(detail, "request matched by previous_fingerprints[0]") {
			t.Fatalf("takeover detail %q", detail)
		}

		// Another amount is another request under either selector.
		if other := post(t, next, alice, done, `{"amount":999,"currency":"EUR","note":"first"}`); other.status != 422 {
			t.Fatalf("another amount: %d %s", other.status, other.body)
		}
		if again := post(t, next, alice, done, charge); again.status != 201 || l.charges.Load() != 2 {
			t.Fatalf("%d, %d charges", again.status, l.charges.Load())
		}
	})
}

// takeoverDetail is the detail of the TAKEN_OVER entry of the charge under key.
func takeoverDetail(t *testing.T, client *idemd.Client, key string) string {
	t.Helper()
	found, err := client.Lookup(context.Background(), &idemv1.LookupRequest{
		Target: &idemv1.LookupRequest_Scope{Scope: &idemv1.Scope{
			Operation: "http.post/charges", Key: idemdhttp.ScopedKey(alice, idemdhttp.ParseKey(key)),
		}},
		IncludeHistory: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range found.GetHistory() {
		if entry.GetEvent() == "TAKEN_OVER" {
			return entry.GetDetail()
		}
	}
	return ""
}

// A version without a selector identified a request by all of it (method, path,
// query, content type, body): an empty previous selector stands for it, so a
// deployment that introduces WithSelector replays what the old version answered.
func TestAnEmptyPreviousSelectorIsTheWholeRequestOfAVersionWithoutOne(t *testing.T) {
	eachStore(t, func(t *testing.T, client *idemd.Client) {
		l := &ledger{}
		old := version(t, client, l.handler(false))
		unprepared := version(t, client, l.handler(false), idemdhttp.WithSelector(amountOnly))
		next := version(t, client, l.handler(false), idemdhttp.WithSelector(amountOnly),
			idemdhttp.WithPreviousSelectors(nil, amountAndCurrency))
		key := newKey()
		charge := `{"amount":100,"currency":"EUR"}`
		first := post(t, old, alice, key, charge)
		if unready := post(t, unprepared, alice, key, charge); first.status != 201 || unready.status != 422 {
			t.Fatalf("%d %s; without the window %d", first.status, first.body, unready.status)
		}
		replayed := post(t, next, alice, key, charge)
		if replayed.status != 201 || string(replayed.body) != string(first.body) || l.charges.Load() != 1 {
			t.Fatalf("%d %s, %d charges", replayed.status, replayed.body, l.charges.Load())
		}
	})
}

func TestMoreThanFourPreviousSelectorsIsRefusedWhereTheMiddlewareIsMade(t *testing.T) {
	defer func() {
		if refused := recover(); refused == nil || !strings.Contains(fmt.Sprint(refused), "WithPreviousSelectors") {
			t.Fatalf("recovered %v", refused)
		}
	}()
	five := []*idemd.Selector{amountOnly, amountOnly, amountOnly, amountOnly, amountOnly}
	idemdhttp.Middleware(nil, idemdhttp.WithPreviousSelectors(five...))
	t.Fatal("five previous selectors were accepted")
}
