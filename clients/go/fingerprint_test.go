package idemd

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

type fingerprintVector struct {
	Name        string `json:"name"`
	Mode        string `json:"mode"`
	Input       string `json:"input"`
	InputHex    string `json:"input_hex"`
	Canonical   string `json:"canonical"`
	Fingerprint string `json:"fingerprint"`
	Refused     string `json:"refused"`
}

// The shared vectors (testdata/fingerprints.json) pin what the server computes; every
// client reproduces each of them, refusals included.
func TestFingerprintsReproduceEverySharedVector(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fingerprints.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []fingerprintVector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) < 60 {
		t.Fatalf("only %d vectors read", len(file.Vectors))
	}
	var accepted, refusals int
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			switch v.Mode {
			case "bytes":
				payload, err := hex.DecodeString(v.InputHex)
				if err != nil {
					t.Fatal(err)
				}
				sum := FingerprintBytes(payload)
				if got := hex.EncodeToString(sum[:]); got != v.Fingerprint {
					t.Fatalf("fingerprint %s, want %s", got, v.Fingerprint)
				}
				accepted++
			case "json":
				canonical, err := CanonicalJSON([]byte(v.Input))
				if v.Refused != "" {
					if !errors.Is(err, ErrNotIJSON) {
						t.Fatalf("accepted %q as %q; the server refuses it: %s", v.Input, canonical, v.Refused)
					}
					if _, err := FingerprintJSON([]byte(v.Input)); !errors.Is(err, ErrNotIJSON) {
						t.Fatalf("FingerprintJSON accepted it: %v", err)
					}
					refusals++
					return
				}
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if string(canonical) != v.Canonical {
					t.Fatalf("canonical %q, want %q", canonical, v.Canonical)
				}
				sum, err := FingerprintJSON([]byte(v.Input))
				if err != nil {
					t.Fatal(err)
				}
				if got := hex.EncodeToString(sum[:]); got != v.Fingerprint {
					t.Fatalf("fingerprint %s, want %s", got, v.Fingerprint)
				}
				accepted++
			default:
				t.Fatalf("unknown mode %q", v.Mode)
			}
		})
	}
	if accepted == 0 || refusals == 0 {
		t.Fatalf("accepted %d, refused %d: the file's shape changed?", accepted, refusals)
	}
}

func TestCanonicalJSONRefusesInvalidUTF8AndDeepNesting(t *testing.T) {
	if _, err := CanonicalJSON([]byte("\"\xff\"")); !errors.Is(err, ErrNotIJSON) {
		t.Fatalf("invalid UTF-8 accepted: %v", err)
	}
	deep := make([]byte, 0, 2*(maxJSONDepth+2))
	for range maxJSONDepth + 2 {
		deep = append(deep, '[')
	}
	for range maxJSONDepth + 2 {
		deep = append(deep, ']')
	}
	if _, err := CanonicalJSON(deep); !errors.Is(err, ErrNotIJSON) {
		t.Fatalf("nesting past the bound accepted: %v", err)
	}
}
