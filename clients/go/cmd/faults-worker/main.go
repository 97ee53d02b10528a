// Command faults-worker is the fault campaign's worker for the Go client
// (faults/workers/README.md): it reads deliveries as JSON lines on stdin, runs
// ExecuteOnce for each (all at once) against the duplicating stages named in
// IDEMD_FAULTS_TARGETS, with the effect and the lookup at the campaign's HTTP
// provider (IDEMD_FAULTS_PROVIDER), and writes each delivery's outcome as a JSON
// line on stdout.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	idemd "github.com/idemd/idemd/clients/go"
)

type stall struct {
	PerformedFirst bool  `json:"performed_first"`
	Ms             int64 `json:"ms"`
}

type request struct {
	ID          uint64 `json:"id"`
	Key         string `json:"key"`
	Payload     string `json:"payload"`
	HonourKey   bool   `json:"honour_key"`
	Client      int    `json:"client"`
	LeaseMs     int64  `json:"lease_ms"`
	AttemptMs   int64  `json:"attempt_ms"`
	MaxAttempts uint32 `json:"max_attempts"`
	DeadlineMs  int64  `json:"deadline_ms"`
	WorkMs      int64  `json:"work_ms"`
	Conflict    bool   `json:"conflict"`
	Stall       *stall `json:"stall"`
}

type reply struct {
	ID          uint64 `json:"id"`
	Outcome     string `json:"outcome"`
	Error       string `json:"error,omitempty"`
	OperationID string `json:"operation_id,omitempty"`
	Body        string `json:"body,omitempty"`
	Source      string `json:"source,omitempty"`
	Code        string `json:"code,omitempty"`
}

type worker struct {
	clients  []*idemd.Client
	provider string
	http     *http.Client
}

// get asks the campaign's provider; its status and body.
func (w *worker) get(ctx context.Context, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.provider+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := w.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

func (w *worker) noteAttempt(ctx context.Context, a *idemd.Attempt) error {
	takeover := 0
	if a.PreviousOutcomeUnknown {
		takeover = 1
	}
	_, _, err := w.get(ctx, fmt.Sprintf("/attempt?reference=%s&fence=%d&takeover=%d", url.QueryEscape(a.OperationID), a.Fence, takeover))
	return err
}

func (w *worker) perform(ctx context.Context, a *idemd.Attempt, honourKey bool) (idemd.Outcome, error) {
	honour := 0
	if honourKey {
		honour = 1
	}
	_, body, err := w.get(ctx, fmt.Sprintf("/perform?reference=%s&honour_key=%d", url.QueryEscape(a.OperationID), honour))
	if err != nil {
		return nil, err
	}
	return idemd.Success{Body: body, ContentType: "application/json"}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *worker) deliver(r request) reply {
	client := w.clients[r.Client%len(w.clients)]
	var effectRan, found atomic.Bool
	effect := func(ctx context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
		if err := w.noteAttempt(ctx, a); err != nil {
			return nil, err
		}
		effectRan.Store(true)
		if r.Conflict {
			_, _, _ = w.get(ctx, "/forbidden?key="+url.QueryEscape(r.Key))
			return idemd.Terminal{Code: "CONFLICT_EXECUTED"}, nil
		}
		if r.Stall != nil {
			if r.Stall.PerformedFirst {
				if _, err := w.perform(ctx, a, false); err != nil {
					return nil, err
				}
			}
			// Cancelled at the attempt deadline, before the second perform.
			if err := sleep(ctx, time.Duration(r.Stall.Ms)*time.Millisecond); err != nil {
				return nil, err
			}
			return w.perform(ctx, a, false)
		}
		if err := sleep(ctx, time.Duration(r.WorkMs)*time.Millisecond); err != nil {
			return nil, err
		}
		return w.perform(ctx, a, r.HonourKey)
	}
	lookup := func(ctx context.Context, a *idemd.Attempt) (idemd.Outcome, error) {
		if err := w.noteAttempt(ctx, a); err != nil {
			return nil, err
		}
		status, body, err := w.get(ctx, "/lookup?reference="+url.QueryEscape(a.OperationID))
		if err != nil {
			return nil, err
		}
		if status == http.StatusOK {
			found.Store(true)
			return idemd.Success{Body: body, ContentType: "application/json"}, nil
		}
		return nil, nil
	}
	options := []idemd.ExecuteOption{
		idemd.WithLease(time.Duration(r.LeaseMs) * time.Millisecond),
		idemd.WithAttemptDuration(time.Duration(r.AttemptMs) * time.Millisecond),
		idemd.WithPendingTimeout(time.Duration(r.DeadlineMs) * time.Millisecond),
		idemd.WithMaxAttempts(r.MaxAttempts),
	}
	switch {
	case r.Conflict:
	case r.HonourKey:
		options = append(options, idemd.WithProviderDeduplicates())
	default:
		options = append(options, idemd.WithLookup(lookup))
	}
	result, err := client.ExecuteOnce(context.Background(), "faults.transfer", r.Key, idemd.JSONText(r.Payload), effect, options...)
	if err != nil {
		return replyOf(err)
	}
	source := "executed"
	switch {
	case result.Replayed:
		source = "replayed"
	case found.Load() && !effectRan.Load():
		source = "reconciled"
	}
	return reply{Outcome: "succeeded", OperationID: result.OperationID, Body: string(result.Body), Source: source}
}

func replyOf(err error) reply {
	var (
		failed     *idemd.OperationFailedError
		unknown    *idemd.OutcomeUnknownError
		needs      *idemd.NeedsReconciliationError
		pending    *idemd.PendingError
		superseded *idemd.SupersededError
		status     *idemd.StatusError
	)
	switch {
	case errors.Is(err, idemd.ErrIdempotencyKeyReused):
		return reply{Outcome: "error", Error: "conflict"}
	case errors.As(err, &failed):
		return reply{Outcome: "failed", OperationID: failed.OperationID, Code: failed.Code}
	case errors.As(err, &superseded), errors.Is(err, idemd.ErrLeaseLost):
		return reply{Outcome: "error", Error: "lease_lost"}
	case errors.As(err, &unknown):
		return reply{Outcome: "error", Error: "outcome_unknown", OperationID: unknown.OperationID}
	case errors.As(err, &needs):
		return reply{Outcome: "error", Error: "needs_reconciliation", OperationID: needs.OperationID}
	case errors.As(err, &pending):
		return reply{Outcome: "error", Error: "deadline_passed", OperationID: pending.OperationID}
	}
	if errors.As(err, &status) {
		log.Printf("delivery: %v", status)
	} else {
		log.Printf("delivery: %v", err)
	}
	return reply{Outcome: "error", Error: "other"}
}

func main() {
	token := os.Getenv("IDEMD_FAULTS_TOKEN")
	retry := idemd.RetryPolicy{
		MaxSends:       200,
		InitialBackoff: 20 * time.Millisecond,
		MaxBackoff:     300 * time.Millisecond,
		Multiplier:     2,
		TotalTimeout:   20 * time.Second,
		CallTimeout:    2 * time.Second,
	}
	w := &worker{provider: os.Getenv("IDEMD_FAULTS_PROVIDER"), http: &http.Client{Timeout: 30 * time.Second}}
	// Two connections to each replica's stage, in the campaign's order.
	for _, target := range strings.Split(os.Getenv("IDEMD_FAULTS_TARGETS"), ",") {
		for range 2 {
			client, err := idemd.New(idemd.WithAddress(target), idemd.WithToken(token), idemd.WithRetryPolicy(retry))
			if err != nil {
				log.Fatalf("client for %s: %v", target, err)
			}
			defer client.Close()
			w.clients = append(w.clients, client)
		}
	}
	out := json.NewEncoder(os.Stdout)
	var writing sync.Mutex
	write := func(v any) {
		writing.Lock()
		defer writing.Unlock()
		if err := out.Encode(v); err != nil {
			log.Fatalf("stdout: %v", err)
		}
	}
	write(map[string]bool{"ready": true})
	var running sync.WaitGroup
	lines := bufio.NewScanner(os.Stdin)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	for lines.Scan() {
		var r request
		if err := json.Unmarshal(lines.Bytes(), &r); err != nil {
			log.Fatalf("stdin: %v", err)
		}
		running.Go(func() {
			answer := w.deliver(r)
			answer.ID = r.ID
			write(answer)
		})
	}
	running.Wait()
}
