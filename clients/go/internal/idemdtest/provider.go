package idemdtest

import (
	"fmt"
	"sync"
	"time"
)

// Provider is a fake payment provider that counts business effects and can be looked
// up by the reference each effect was made with. Tests count its effects, never
// successful responses.
type Provider struct {
	mu      sync.Mutex
	effects []string
	records map[string][]byte
}

func NewProvider() *Provider { return &Provider{records: map[string][]byte{}} }

// Effect makes one business effect for reference and returns its body.
func (p *Provider) Effect(reference string) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.effects = append(p.effects, reference)
	body := fmt.Appendf(nil, `{"charge":"ch_%d","ref":%q}`, len(p.effects), reference)
	p.records[reference] = body
	return body
}

// Effects is how many effects were made.
func (p *Provider) Effects() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.effects)
}

// Record is the body of the effect made for reference, nil if none.
func (p *Provider) Record(reference string) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.records[reference]
}

// Eventually polls condition until it holds or timeout passes.
func Eventually(timeout time.Duration, condition func() bool) bool {
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		if condition() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return condition()
}
