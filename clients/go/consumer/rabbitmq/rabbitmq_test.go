package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	idemd "github.com/idemd/idemd/clients/go"
	"github.com/idemd/idemd/clients/go/consumer"
	"github.com/idemd/idemd/clients/go/consumer/rabbitmq"
	"github.com/idemd/idemd/clients/go/internal/idemdtest"
)

// One RabbitMQ for the package's tests (it takes seconds to boot), started on first
// use with its own node name, ports, epmd and directory, stopped after the run.
var (
	brokerOnce sync.Once
	brokerPort int
	brokerErr  error
	brokerStop = func() {}
)

func TestMain(m *testing.M) {
	code := m.Run()
	brokerStop()
	os.Exit(code)
}

func freePort(t *testing.T) int {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	return listener.Addr().(*net.TCPAddr).Port
}

func rabbit(t *testing.T) string {
	t.Helper()
	binary := "/usr/lib/rabbitmq/bin/rabbitmq-server"
	if _, err := os.Stat(binary); err != nil {
		if os.Getenv("CI") != "" || os.Getenv("IDEMD_REQUIRE_BROKERS") != "" {
			t.Fatal("rabbitmq-server is missing and CI or IDEMD_REQUIRE_BROKERS is set: install Debian's rabbitmq-server")
		}
		t.Skip("!!!! SKIPPED: rabbitmq-server is missing: `apt-get install -y rabbitmq-server` to run the broker tests !!!!")
	}
	brokerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "idemd-go-rabbitmq-")
		if err != nil {
			brokerErr = err
			return
		}
		_ = os.MkdirAll(filepath.Join(dir, "home"), 0o755)
		_ = os.WriteFile(filepath.Join(dir, "enabled_plugins"), []byte("[].\n"), 0o644)
		_ = os.WriteFile(filepath.Join(dir, "rabbitmq.conf"), nil, 0o644)
		brokerPort = freePort(t)
		epmd := freePort(t)
		server := exec.Command(binary)
		server.Env = []string{
			"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(dir, "home"),
			"RABBITMQ_NODENAME=idemd-go-" + idemdtest.RandomHex(5) + "@localhost",
			"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1", fmt.Sprintf("RABBITMQ_NODE_PORT=%d", brokerPort),
			fmt.Sprintf("RABBITMQ_DIST_PORT=%d", freePort(t)), fmt.Sprintf("ERL_EPMD_PORT=%d", epmd),
			"ERL_EPMD_ADDRESS=127.0.0.1", "RABBITMQ_MNESIA_BASE=" + filepath.Join(dir, "mnesia"),
			"RABBITMQ_LOG_BASE=" + filepath.Join(dir, "log"),
			"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(dir, "enabled_plugins"),
			"RABBITMQ_CONFIG_FILE=" + filepath.Join(dir, "rabbitmq"),
			"RABBITMQ_PID_FILE=" + filepath.Join(dir, "pid"),
		}
		log, _ := os.Create(filepath.Join(dir, "broker.log"))
		server.Stdout, server.Stderr = log, log
		if brokerErr = server.Start(); brokerErr != nil {
			return
		}
		brokerStop = func() {
			_ = server.Process.Signal(syscall.SIGTERM)
			_ = server.Wait()
			_ = exec.Command("epmd", "-port", fmt.Sprint(epmd), "-kill").Run()
			_ = os.RemoveAll(dir)
		}
		started := time.Now()
		if !idemdtest.Eventually(120*time.Second, func() bool {
			connection, err := amqp.Dial(fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", brokerPort))
			if err == nil {
				_ = connection.Close()
			}
			return err == nil
		}) {
			output, _ := os.ReadFile(filepath.Join(dir, "broker.log"))
			brokerErr = fmt.Errorf("rabbitmq-server did not start: %s", output)
			return
		}
		fmt.Fprintf(os.Stderr, "rabbitmq-server started in %s\n", time.Since(started).Round(time.Millisecond))
	})
	if brokerErr != nil {
		t.Fatal(brokerErr)
	}
	return fmt.Sprintf("127.0.0.1:%d", brokerPort)
}

type world struct {
	client             *idemd.Client
	broker             string
	work, dead, parked string
	setup              *amqp.Channel
	mu                 sync.Mutex
	effects            map[string]int
}

func start(t *testing.T) *world {
	t.Helper()
	broker := rabbit(t)
	srv := idemdtest.Start(t, idemdtest.Embedded)
	client, err := idemd.New(idemd.WithAddress(srv.Addr), idemd.WithToken(srv.Token))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	w := &world{client: client, broker: broker, effects: map[string]int{},
		work: "work-" + idemdtest.RandomHex(4), dead: "dead-" + idemdtest.RandomHex(4), parked: "parked-" + idemdtest.RandomHex(4)}
	_, w.setup = w.connect(t, broker)
	for _, queue := range []string{w.work, w.dead, w.parked} {
		if _, err := w.setup.QueueDeclare(queue, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *world) connect(t *testing.T, address string) (*amqp.Connection, *amqp.Channel) {
	t.Helper()
	connection, err := amqp.Dial("amqp://guest:guest@" + address + "/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = connection.Close() })
	channel, err := connection.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return connection, channel
}

func (w *world) publish(t *testing.T, id, body string) {
	t.Helper()
	if err := w.setup.PublishWithContext(context.Background(), "", w.work, false, false,
		amqp.Publishing{MessageId: id, Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
}

func (w *world) handler(_ context.Context, _ *idemd.Attempt, m consumer.Message) (idemd.Outcome, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.effects[string(m.Body)]++
	if string(m.Body) == "order-unknown" {
		return nil, errors.New("the carrier did not answer")
	}
	return idemd.Success{Body: []byte(`{"shipped":true}`)}, nil
}

func (w *world) consumer(t *testing.T, channel *amqp.Channel, settings consumer.Settings) (*rabbitmq.Consumer, <-chan amqp.Delivery) {
	t.Helper()
	c, err := rabbitmq.New(w.client, channel, settings, w.dead, w.parked)
	if err != nil {
		t.Fatal(err)
	}
	if err := channel.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := channel.Consume(w.work, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, deliveries
}

func next(t *testing.T, deliveries <-chan amqp.Delivery) amqp.Delivery {
	t.Helper()
	select {
	case delivery, ok := <-deliveries:
		if !ok {
			t.Fatal("the deliveries ended")
		}
		return delivery
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery within 20 s")
	}
	return amqp.Delivery{}
}

const messages = 5

// The first consumer decides every message and is lost before a single ack (its
// channel closed, or its TCP connection cut); the second gets them all again,
// flagged redelivered, replays and acks; then nacks with requeue redeliver again.
func TestLosingTheConsumerBeforeItsAcksAndNacksExecuteEachMessageOnce(t *testing.T) {
	for _, loss := range []string{"channel closed", "connection cut"} {
		t.Run(loss, func(t *testing.T) {
			w := start(t)
			for n := range messages {
				w.publish(t, fmt.Sprintf("m-%d", n), fmt.Sprintf("order-%d", n))
			}
			settings := consumer.Settings{Operation: "shipments.create"}
			address := w.broker
			var cut func()
			if loss == "connection cut" {
				address, cut = cutProxy(t, w.broker)
			}
			_, firstChannel := w.connect(t, address)
			first, deliveries := w.consumer(t, firstChannel, settings)
			for range messages {
				if verdict := first.Decide(context.Background(), next(t, deliveries), w.handler); verdict.Kind != consumer.Ack {
					t.Fatalf("%+v", verdict)
				}
			}
			if cut != nil {
				cut()
			} else if err := firstChannel.Close(); err != nil {
				t.Fatal(err)
			}

			_, secondChannel := w.connect(t, w.broker)
			second, deliveries := w.consumer(t, secondChannel, settings)
			seen := map[string]int{}
			redelivered, acked := 0, 0
			for acked < messages {
				delivery := next(t, deliveries)
				if delivery.Redelivered {
					redelivered++
				}
				seen[delivery.MessageId]++
				verdict := second.Decide(context.Background(), delivery, w.handler)
				if verdict.Kind != consumer.Ack || !verdict.Replayed {
					t.Fatalf("%+v", verdict)
				}
				if seen[delivery.MessageId] <= 2 {
					if err := delivery.Nack(false, true); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := second.Settle(context.Background(), delivery, verdict); err != nil {
					t.Fatal(err)
				}
				acked++
			}
			t.Logf("rabbitmq (go, %s, then nacks): %d redeliveries seen, effects %v", loss, redelivered, w.effects)
			if redelivered != messages*3 {
				t.Fatalf("%d redeliveries, want %d", redelivered, messages*3)
			}
			for n := range messages {
				if got := w.effects[fmt.Sprintf("order-%d", n)]; got != 1 {
					t.Fatalf("order-%d: %d effects", n, got)
				}
			}
			if queue, err := w.setup.QueueDeclarePassive(w.work, false, false, false, false, nil); err != nil || queue.Messages != 0 {
				t.Fatalf("left in the queue: %+v %v", queue, err)
			}
		})
	}
}

func TestAConflictIsDeadLetteredAndAnUnknownOutcomeParked(t *testing.T) {
	w := start(t)
	w.publish(t, "m-1", "order-1")
	w.publish(t, "m-1", "order-1")
	w.publish(t, "m-1", "order-1-changed")
	w.publish(t, "m-2", "order-unknown")
	w.publish(t, "m-2", "order-unknown")
	_, channel := w.connect(t, w.broker)
	settings := consumer.Settings{Operation: "shipments.create", Options: []idemd.ExecuteOption{idemd.WithMaxAttempts(1)}}
	c, deliveries := w.consumer(t, channel, settings)
	var shown []string
	for range 5 {
		verdict, err := c.Handle(context.Background(), next(t, deliveries), w.handler)
		if err != nil {
			t.Fatal(err)
		}
		shown = append(shown, fmt.Sprintf("%s %s %v", verdict.Kind, verdict.Reason, verdict.Replayed))
	}
	want := []string{"ack  false", "ack  true", "dead-letter IDEMPOTENCY_KEY_REUSED false",
		"park OUTCOME_UNKNOWN false", "park NEEDS_RECONCILIATION false"}
	if fmt.Sprint(shown) != fmt.Sprint(want) {
		t.Fatalf("verdicts %q, want %q", shown, want)
	}
	if w.effects["order-1"] != 1 || w.effects["order-1-changed"] != 0 || w.effects["order-unknown"] != 1 {
		t.Fatalf("effects %v", w.effects)
	}
	dead, ok, err := w.setup.Get(w.dead, true)
	if err != nil || !ok || string(dead.Body) != "order-1-changed" || dead.Headers[consumer.HeaderReason] != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("dead letter %v %v %s %v", ok, err, dead.Body, dead.Headers)
	}
	for _, want := range []string{"OUTCOME_UNKNOWN", "NEEDS_RECONCILIATION"} {
		parked, ok, err := w.setup.Get(w.parked, true)
		if err != nil || !ok || parked.Headers[consumer.HeaderReason] != want {
			t.Fatalf("parked %v %v %v, want %s", ok, err, parked.Headers, want)
		}
	}
}

// cutProxy relays TCP to upstream until cut: then every connection is aborted (no
// AMQP close), as a network failure would.
func cutProxy(t *testing.T, upstream string) (string, func()) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var open []net.Conn
	go func() {
		for {
			down, err := listener.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = down.Close()
				continue
			}
			mu.Lock()
			open = append(open, down, up)
			mu.Unlock()
			go func() { _, _ = io.Copy(up, down); _ = up.Close() }()
			go func() { _, _ = io.Copy(down, up); _ = down.Close() }()
		}
	}()
	t.Cleanup(func() { _ = listener.Close() })
	return listener.Addr().String(), func() {
		_ = listener.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, connection := range open {
			if tcp, ok := connection.(*net.TCPConn); ok {
				_ = tcp.SetLinger(0) // RST, not FIN
			}
			_ = connection.Close()
		}
	}
}
