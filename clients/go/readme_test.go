package idemd_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idemd/idemd/clients/go/internal/idemdtest"
)

// The README's programs are the examples, byte for byte, so what it shows compiles
// (go vet ./... builds the examples) and the charge example runs as it says.

var goBlocks = regexp.MustCompile("(?s)```go\n(.*?)```")

func TestTheReadmeProgramsAreTheExamples(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	programs := 0
	for _, block := range goBlocks.FindAllStringSubmatch(string(readme), -1) {
		if !strings.Contains(block[1], "package main") {
			continue
		}
		programs++
		var example string
		switch {
		case strings.Contains(block[1], "./examples/charge"):
			example = "examples/charge/main.go"
		case strings.Contains(block[1], "./examples/shop"):
			example = "examples/shop/main.go"
		default:
			t.Fatalf("a README program that is no example:\n%s", block[1])
		}
		source, err := os.ReadFile(example)
		if err != nil {
			t.Fatal(err)
		}
		if string(source) != block[1] {
			t.Fatalf("the README's copy of %s differs from it", example)
		}
	}
	if programs != 2 {
		t.Fatalf("%d programs in the README", programs)
	}
}

func TestTheChargeExampleChargesOnce(t *testing.T) {
	srv := idemdtest.Start(t, idemdtest.Embedded)
	binary := filepath.Join(t.TempDir(), "charge")
	build := exec.Command("go", "build", "-o", binary, "./examples/charge")
	build.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=readonly")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var outputs []string
	for range 2 {
		run := exec.Command(binary)
		run.Env = append(os.Environ(), "IDEMD_ADDR="+srv.Addr, "IDEMD_TOKEN="+srv.Token)
		out, err := run.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		outputs = append(outputs, strings.TrimSpace(string(out)))
	}
	if outputs[0] != `{"charge":"ch_1"} (charged)` || outputs[1] != `{"charge":"ch_1"} (replayed)` {
		t.Fatalf("outputs %q", outputs)
	}
	// Without a token, the example stops at once and says why.
	run := exec.Command(binary)
	run.Env = append(os.Environ(), "IDEMD_ADDR="+srv.Addr, "IDEMD_TOKEN=")
	out, err := run.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "empty token") {
		t.Fatalf("%v %s", err, out)
	}
}
