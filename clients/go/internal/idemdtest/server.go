// Package idemdtest runs the real idemd server for the client's tests: on the
// embedded store in a fresh data directory, and on Postgres when DATABASE_URL is set
// (one fresh database per test binary, made and migrated by `idemd migrate`; each
// test is its own tenant, so tests never see each other's operations).
//
// IDEMD_BIN names the server binary (default: the repository's target/debug/idemd).
// A missing binary fails the tests: a suite that quietly ran without its server
// would pass having tested nothing.
package idemdtest

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Store is where a test server keeps its records.
type Store string

const (
	Embedded Store = "embedded"
	Postgres Store = "postgres"
)

// Stores are the stores every store-dependent test runs on.
var Stores = []Store{Embedded, Postgres}

// Bin is the idemd binary the tests run.
func Bin() (string, error) {
	bin := os.Getenv("IDEMD_BIN")
	if bin == "" {
		_, file, _, _ := runtime.Caller(0)
		bin = filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "target", "debug", "idemd")
	}
	absolute, err := filepath.Abs(bin)
	if err != nil {
		return "", err
	}
	info, err := os.Stat(absolute)
	if err != nil || info.IsDir() {
		return "", fmt.Errorf("no idemd binary at %s: build it (cargo build --bin idemd) or set IDEMD_BIN", absolute)
	}
	return absolute, nil
}

// Key is a fresh idempotency key.
func Key() string { return "k-" + RandomHex(16) }

// RandomHex is n random bytes in hex.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var (
	postgresOnce sync.Once
	postgresURL  string
	postgresErr  error
	postgresBase string
	postgresName string
)

// postgresDatabase is the run's fresh, migrated database on DATABASE_URL's server.
func postgresDatabase(bin string) (string, error) {
	postgresOnce.Do(func() {
		base := os.Getenv("DATABASE_URL")
		parsed, err := url.Parse(base)
		if err != nil {
			postgresErr = fmt.Errorf("DATABASE_URL: %w", err)
			return
		}
		postgresBase = base
		postgresName = "idemd_go_" + RandomHex(8)
		parsed.Path = "/" + postgresName
		postgresURL = parsed.String()
		migrate := exec.Command(bin, "migrate")
		migrate.Env = []string{"PATH=" + os.Getenv("PATH"), "DATABASE_URL=" + postgresURL}
		if out, err := migrate.CombinedOutput(); err != nil {
			postgresErr = fmt.Errorf("idemd migrate: %v: %s", err, out)
		}
	})
	return postgresURL, postgresErr
}

// Main runs the tests, then drops the run's Postgres database (when psql is there).
func Main(m *testing.M) {
	code := m.Run()
	if postgresName != "" {
		if psql, err := exec.LookPath("psql"); err == nil {
			drop := exec.Command(psql, postgresBase, "-q", "-c",
				fmt.Sprintf(`DROP DATABASE IF EXISTS "%s" WITH (FORCE)`, postgresName))
			_ = drop.Run()
		}
	}
	os.Exit(code)
}

// Server is one idemd store and the process serving it (restartable on its port).
type Server struct {
	t      testing.TB
	bin    string
	Store  Store
	dir    string
	env    []string
	Addr   string
	Port   int
	Token  string
	cmd    *exec.Cmd
	exited chan struct{}
	starts int
	mu     sync.Mutex
}

// Start starts a server on store for the test (skipped on Postgres when
// DATABASE_URL is unset), with a tenant of its own (Token); extra is added to the
// server's environment (NAME=value). It is killed when the test ends.
func Start(t testing.TB, store Store, extra ...string) *Server {
	t.Helper()
	bin, err := Bin()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, bin: bin, Store: store, dir: t.TempDir()}
	s.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"IDEMD_METRICS_LISTEN=off",
		// The tests talk plaintext on loopback; serve refuses that unless asked.
		"IDEMD_INSECURE_PLAINTEXT=true",
		"IDEMD_MIN_LEASE=10ms",
		"IDEMD_CLOCK_MARGIN=0s",
		"IDEMD_LOG_FORMAT=json",
		"RUST_LOG=info",
	}
	switch store {
	case Postgres:
		if os.Getenv("DATABASE_URL") == "" {
			t.Skip("set DATABASE_URL=postgres://... to run the Postgres store's tests")
		}
		databaseURL, err := postgresDatabase(bin)
		if err != nil {
			t.Fatal(err)
		}
		s.env = append(s.env, "DATABASE_URL="+databaseURL)
	case Embedded:
		s.env = append(s.env, "IDEMD_DATA_DIR="+filepath.Join(s.dir, "data"))
	}
	s.env = append(s.env, extra...)
	s.Token = s.CreateTenant()
	s.Start()
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			s.dumpLogs()
		}
	})
	return s
}

// CreateTenant makes a new tenant and returns its bearer token.
func (s *Server) CreateTenant() string {
	s.t.Helper()
	create := exec.Command(s.bin, "tenant", "create", "go-"+RandomHex(6))
	create.Env = s.env
	var stderr strings.Builder
	create.Stderr = &stderr
	out, err := create.Output()
	if err != nil {
		s.t.Fatalf("idemd tenant create: %v: %s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// Start starts serving (again, on the same port after the first start).
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starts++
	logPath := filepath.Join(s.dir, fmt.Sprintf("serve-%d.log", s.starts))
	logFile, err := os.Create(logPath)
	if err != nil {
		s.t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(s.bin, "serve", "--listen", "127.0.0.1:"+strconv.Itoa(s.Port))
	cmd.Env = s.env
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if addr := servingAddress(logPath); addr != "" {
			s.Addr = addr
			s.Port, _ = strconv.Atoi(addr[strings.LastIndex(addr, ":")+1:])
			return
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logPath)
			s.t.Fatalf("idemd exited: %s", log)
		case <-time.After(20 * time.Millisecond):
		}
	}
	log, _ := os.ReadFile(logPath)
	s.t.Fatalf("idemd did not start: %s", log)
}

func servingAddress(logPath string) string {
	file, err := os.Open(logPath)
	if err != nil {
		return ""
	}
	defer file.Close()
	scanner := bufio.NewScanner(file)
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.Contains(line, `"idemd serving"`) {
			continue
		}
		var entry struct {
			Listen string `json:"listen"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Listen != "" {
			return entry.Listen
		}
	}
	return ""
}

// Kill sends SIGKILL: no drain; whatever was not committed is lost.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Starts is how often the server was started.
func (s *Server) Starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts
}

func (s *Server) dumpLogs() {
	logs, _ := filepath.Glob(filepath.Join(s.dir, "serve-*.log"))
	for _, path := range logs {
		content, _ := os.ReadFile(path)
		text := string(content)
		if len(text) > 20000 {
			text = "…" + text[len(text)-20000:]
		}
		s.t.Logf("server log %s:\n%s", filepath.Base(path), text)
	}
}
