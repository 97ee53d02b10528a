package jetstream_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	idemd "github.com/idemd/idemd/clients/go"
	"github.com/idemd/idemd/clients/go/consumer"
	dedup "github.com/idemd/idemd/clients/go/consumer/jetstream"
	"github.com/idemd/idemd/clients/go/internal/idemdtest"
)

func TestMain(m *testing.M) { idemdtest.Main(m) }

// startNATS starts Debian's nats-server with JetStream on a private port and data
// directory, stopped when the test ends. Missing, it fails the test when CI or
// IDEMD_REQUIRE_BROKERS is set, and skips loudly elsewhere.
func startNATS(t *testing.T) string {
	t.Helper()
	binary, err := exec.LookPath("nats-server")
	if err != nil {
		for _, candidate := range []string{"/usr/sbin/nats-server", "/usr/bin/nats-server"} {
			if _, statErr := os.Stat(candidate); statErr == nil {
				binary, err = candidate, nil
			}
		}
	}
	if err != nil {
		if os.Getenv("CI") != "" || os.Getenv("IDEMD_REQUIRE_BROKERS") != "" {
			t.Fatal("nats-server is missing and CI or IDEMD_REQUIRE_BROKERS is set: install Debian's nats-server")
		}
		t.Skip("!!!! SKIPPED: nats-server is missing: `apt-get install -y nats-server` to run the broker tests !!!!")
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := listener.Addr().(*net.TCPAddr).Port
	_ = listener.Close()
	server := exec.Command(binary, "-js", "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-sd", t.TempDir())
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })
	address := fmt.Sprintf("127.0.0.1:%d", port)
	if !idemdtest.Eventually(10*time.Second, func() bool {
		connection, err := net.Dial("tcp", address)
		if err == nil {
			_ = connection.Close()
		}
		return err == nil
	}) {
		t.Fatal("nats-server did not listen")
	}
	return "nats://" + address
}

type effects struct {
	sync.Mutex
	counts map[string]int
}

func (e *effects) handler(_ context.Context, _ *idemd.Attempt, m consumer.Message) (idemd.Outcome, error) {
	e.Lock()
	defer e.Unlock()
	e.counts[string(m.Body)]++
	return idemd.Success{Body: []byte(`{"shipped":true}`)}, nil
}

type setup struct {
	js       jetstream.JetStream
	consumer jetstream.Consumer
	dedup    *dedup.Consumer
	subject  string
}

func start(t *testing.T, ackWait time.Duration, settings consumer.Settings) *setup {
	t.Helper()
	ctx := context.Background()
	srv := idemdtest.Start(t, idemdtest.Embedded)
	client, err := idemd.New(idemd.WithAddress(srv.Addr), idemd.WithToken(srv.Token))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	nc, err := nats.Connect(startNATS(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "WORK", Subjects: []string{"work.orders"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SETTLED", Subjects: []string{"settled.>"}}); err != nil {
		t.Fatal(err)
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "shipper", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &setup{js: js, consumer: cons, subject: "work.orders", dedup: &dedup.Consumer{
		Client: client, JetStream: js, Settings: settings,
		DeadLetterSubject: "settled.dead", ParkingSubject: "settled.parked",
	}}
}

func (s *setup) publish(t *testing.T, id, body string) {
	t.Helper()
	msg := &nats.Msg{Subject: s.subject, Data: []byte(body), Header: nats.Header{nats.MsgIdHdr: []string{id}}}
	if _, err := s.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
}

func (s *setup) next(t *testing.T) jetstream.Msg {
	t.Helper()
	batch, err := s.consumer.Fetch(1, jetstream.FetchMaxWait(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for msg := range batch.Messages() {
		return msg
	}
	t.Fatalf("no message within 20 s: %v", batch.Error())
	return nil
}

// Each message is decided, then left unanswered (ack-wait expires) or nak'ed twice;
// the third delivery replays and acks. One effect per message, redeliveries counted.
func TestRedeliveriesReplayNeverReexecute(t *testing.T) {
	for _, answer := range []string{"ack-wait", "nak"} {
		t.Run(answer, func(t *testing.T) {
			ackWait := 30 * time.Second
			if answer == "ack-wait" {
				ackWait = time.Second
			}
			s := start(t, ackWait, consumer.Settings{Operation: "shipments.create"})
			for n := range 3 {
				s.publish(t, fmt.Sprintf("m-%d", n), fmt.Sprintf("order-%d", n))
			}
			seen := &effects{counts: map[string]int{}}
			redeliveries, acked := 0, 0
			for acked < 3 {
				msg := s.next(t)
				metadata, err := msg.Metadata()
				if err != nil {
					t.Fatal(err)
				}
				if metadata.NumDelivered > 1 {
					redeliveries++
				}
				verdict := s.dedup.Decide(context.Background(), msg, seen.handler)
				if verdict.Kind != consumer.Ack || verdict.Replayed != (metadata.NumDelivered > 1) {
					t.Fatalf("delivery %d: %+v", metadata.NumDelivered, verdict)
				}
				switch {
				case metadata.NumDelivered > 2:
					if err := s.dedup.Settle(context.Background(), msg, verdict); err != nil {
						t.Fatal(err)
					}
					acked++
				case answer == "nak":
					if err := msg.Nak(); err != nil {
						t.Fatal(err)
					}
				}
			}
			t.Logf("jetstream (go, %s): %d redeliveries seen, %v effects", answer, redeliveries, seen.counts)
			if redeliveries != 6 {
				t.Fatalf("%d redeliveries, want 6", redeliveries)
			}
			for n := range 3 {
				if got := seen.counts[fmt.Sprintf("order-%d", n)]; got != 1 {
					t.Fatalf("order-%d: %d effects", n, got)
				}
			}
		})
	}
}

func TestAConflictIsDeadLetteredWithTheReasonNeverExecuted(t *testing.T) {
	byOrder := func(m consumer.Message) (string, error) {
		order, _, _ := strings.Cut(strings.TrimPrefix(string(m.Body), "order-"), "-")
		return order, nil
	}
	s := start(t, 30*time.Second, consumer.Settings{Operation: "shipments.create", Identity: byOrder})
	s.publish(t, "m-1", "order-7")
	s.publish(t, "m-2", "order-7")
	s.publish(t, "m-3", "order-7-changed")
	seen := &effects{counts: map[string]int{}}
	var shown []string
	for range 3 {
		verdict, err := s.dedup.Handle(context.Background(), s.next(t), seen.handler)
		if err != nil {
			t.Fatal(err)
		}
		shown = append(shown, fmt.Sprintf("%s %s %v", verdict.Kind, verdict.Reason, verdict.Replayed))
	}
	want := "ack  false|ack  true|dead-letter IDEMPOTENCY_KEY_REUSED false"
	if got := strings.Join(shown, "|"); got != want {
		t.Fatalf("verdicts %q, want %q", got, want)
	}
	if seen.counts["order-7"] != 1 || seen.counts["order-7-changed"] != 0 {
		t.Fatalf("effects %v", seen.counts)
	}
	settled, err := s.js.Stream(context.Background(), "SETTLED")
	if err != nil {
		t.Fatal(err)
	}
	dead, err := settled.GetMsg(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if string(dead.Data) != "order-7-changed" || dead.Header.Get(consumer.HeaderReason) != "IDEMPOTENCY_KEY_REUSED" ||
		dead.Header.Get(dedup.HeaderMessageID) != "m-3" || dead.Header.Get(consumer.HeaderOperationID) == "" {
		t.Fatalf("dead letter %s %v", dead.Data, dead.Header)
	}
}
