package idemd_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	idemd "github.com/idemd/idemd/clients/go"
	"github.com/idemd/idemd/clients/go/internal/idemdtest"
)

type selectorVector struct {
	Name        string               `json:"name"`
	Body        string               `json:"body"`
	Selector    idemd.SelectorFields `json:"selector"`
	Headers     [][2]string          `json:"headers"`
	Canonical   string               `json:"canonical"`
	Fingerprint string               `json:"fingerprint"`
	Refused     string               `json:"refused"`
	RefusedAt   string               `json:"refused_at"`
}

// The shared selector vectors (testdata/selectors.json, docs/api.md "Request
// selectors"): every client selects the same document, refusals included.
func TestSelectorsReproduceEverySharedVector(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "selectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []selectorVector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) < 40 {
		t.Fatalf("only %d vectors read", len(file.Vectors))
	}
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			selector, err := idemd.NewSelector(v.Selector)
			if v.RefusedAt == "selector" {
				if !errors.Is(err, idemd.ErrInvalidSelector) {
					t.Fatalf("selector %+v accepted (%v); refused because %s", v.Selector, err, v.Refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			canonical, err := selector.Canonical([]byte(v.Body), v.Headers)
			if v.RefusedAt == "request" {
				if !errors.Is(err, idemd.ErrInvalidRequest) {
					t.Fatalf("body %q selected as %q (%v); refused because %s", v.Body, canonical, err, v.Refused)
				}
				return
			}
			if err != nil || string(canonical) != v.Canonical {
				t.Fatalf("canonical %q (%v), want %q", canonical, err, v.Canonical)
			}
			sum, err := selector.Fingerprint([]byte(v.Body), v.Headers)
			if got := hex.EncodeToString(sum[:]); err != nil || got != v.Fingerprint {
				t.Fatalf("fingerprint %s (%v), want %s", got, err, v.Fingerprint)
			}
		})
	}
}

func TestTheEmptySelectorIsTodaysFingerprint(t *testing.T) {
	body := []byte(`{"currency":"EUR","amount":1000}`)
	selector := idemd.MustSelector(idemd.SelectorFields{Include: []string{}})
	got, err := selector.Fingerprint(body, nil)
	want, _ := idemd.FingerprintJSON(body)
	if err != nil || got != want || !selector.Empty() || !(*idemd.Selector)(nil).Empty() {
		t.Fatalf("%x %v, want %x", got, err, want)
	}
}

func TestExecuteOnceWithASelectorReplaysChangesOutsideItAndRefusesChangesInside(t *testing.T) {
	eachStore(t, func(t *testing.T, srv *idemdtest.Server) {
		client := connect(t, srv.Addr, srv.Token)
		provider := idemdtest.NewProvider()
		key := idemdtest.Key()
		amount := idemd.WithSelector(idemd.MustSelector(idemd.SelectorFields{Include: []string{"/amount", "/currency"}}))
		first, err := client.ExecuteOnce(context.Background(), chargeOp, key,
			idemd.JSON(map[string]any{"amount": 1000, "currency": "EUR", "trace": "a"}), charging(provider), amount)
		if err != nil || first.Replayed {
			t.Fatalf("%+v %v", first, err)
		}
		again, err := client.ExecuteOnce(context.Background(), chargeOp, key,
			idemd.JSONText(`{"trace":"b","currency":"EUR","amount":1000}`), charging(provider), amount)
		if err != nil || !again.Replayed || again.OperationID != first.OperationID {
			t.Fatalf("%+v %v", again, err)
		}
		_, err = client.ExecuteOnce(context.Background(), chargeOp, key,
			idemd.JSON(map[string]any{"amount": 1001, "currency": "EUR", "trace": "a"}), charging(provider), amount)
		if !errors.Is(err, idemd.ErrIdempotencyKeyReused) {
			t.Fatalf("a changed amount: %v", err)
		}
		_, err = client.ExecuteOnce(context.Background(), chargeOp, idemdtest.Key(), idemd.JSONText(`[1]`), charging(provider), amount)
		if !errors.Is(err, idemd.ErrInvalidRequest) {
			t.Fatalf("an array body: %v", err)
		}
		_, err = client.ExecuteOnce(context.Background(), chargeOp, idemdtest.Key(), idemd.Bytes([]byte(`{}`)), charging(provider), amount)
		if err == nil {
			t.Fatal("a selector over bytes was accepted")
		}
		if provider.Effects() != 1 {
			t.Fatalf("%d effects", provider.Effects())
		}
	})
}

// A migration window's previous fingerprints are selectors' fingerprints
// (WithPreviousFingerprints): each must be the fingerprint the server computes for
// the selected document sent as json_payload. For every selector vector, the
// selector's fingerprint, the vector's and FingerprintJSON of the selected canonical
// document are one value; for every fingerprint vector of a JSON document the server
// accepts, the empty selector's fingerprint is the server's.
func TestASelectorsFingerprintIsTheServersFingerprintOfTheSelectedDocument(t *testing.T) {
	var selectors struct {
		Vectors []selectorVector `json:"vectors"`
	}
	var fingerprints struct {
		Vectors []struct {
			Mode        string `json:"mode"`
			Input       string `json:"input"`
			Fingerprint string `json:"fingerprint"`
			Refused     string `json:"refused"`
		} `json:"vectors"`
	}
	for file, into := range map[string]any{"selectors.json": &selectors, "fingerprints.json": &fingerprints} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, into); err != nil {
			t.Fatal(err)
		}
	}
	checked := 0
	for _, v := range selectors.Vectors {
		if v.RefusedAt != "" {
			continue
		}
		selector := idemd.MustSelector(v.Selector)
		sum, err := selector.Fingerprint([]byte(v.Body), v.Headers)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		canonical, err := selector.Canonical([]byte(v.Body), v.Headers)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		server, err := idemd.FingerprintJSON(canonical)
		if got := hex.EncodeToString(sum[:]); err != nil || sum != server || got != v.Fingerprint {
			t.Fatalf("%s: selector %s, server %x (%v), vector %s", v.Name, got, server, err, v.Fingerprint)
		}
		checked++
	}
	whole := idemd.MustSelector(idemd.SelectorFields{})
	for _, v := range fingerprints.Vectors {
		if v.Mode != "json" || v.Refused != "" {
			continue
		}
		sum, err := whole.Fingerprint([]byte(v.Input), nil)
		if got := hex.EncodeToString(sum[:]); err != nil || got != v.Fingerprint {
			t.Fatalf("%q: empty selector %s (%v), server %s", v.Input, got, err, v.Fingerprint)
		}
		checked++
	}
	if checked < 50 {
		t.Fatalf("only %d vectors checked", checked)
	}
}
