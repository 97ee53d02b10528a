package idemdtest

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

const http2Headers = 0x1

// Proxy is a TCP proxy in front of idemd that can lose replies, as a network can.
//
// DropNextReply: the next HTTP/2 response (its HEADERS frame, sent by the server
// after it handled the call) is never forwarded; the connection is cut instead.
// DelayReplies: the next responses (one each, in the order the server sends them)
// are held that long before they are forwarded, and what follows them on the
// connection waits too. Cut closes every connection and refuses new ones until
// Restore. SetConnectDelay holds each new connection that long (a slow reconnect).
type Proxy struct {
	upstream string
	listener net.Listener
	Addr     string

	mu           sync.Mutex
	dropsArmed   int
	dropped      int
	delays       []time.Duration
	delayed      int
	refusing     bool
	connectDelay time.Duration
	conns        map[net.Conn]struct{}
}

// StartProxy starts a proxy to upstream (host:port), closed when the test ends.
func StartProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{upstream: upstream, listener: listener, Addr: listener.Addr().String(), conns: map[net.Conn]struct{}{}}
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

func (p *Proxy) DropNextReply() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropsArmed++
}

func (p *Proxy) DelayReplies(delays ...time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delays = append(p.delays, delays...)
}

func (p *Proxy) SetConnectDelay(delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.connectDelay = delay
}

// Dropped is how many replies were dropped.
func (p *Proxy) Dropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// Delayed is how many replies were held.
func (p *Proxy) Delayed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delayed
}

func (p *Proxy) Cut() {
	p.mu.Lock()
	p.refusing = true
	p.mu.Unlock()
	p.closeAll()
}

func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = false
	p.connectDelay = 0
}

func (p *Proxy) Close() {
	_ = p.listener.Close()
	p.closeAll()
}

func (p *Proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for conn := range p.conns {
		_ = conn.Close()
	}
	clear(p.conns)
}

func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refusing {
		return false
	}
	for _, conn := range conns {
		p.conns[conn] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, conn := range conns {
		delete(p.conns, conn)
		_ = conn.Close()
	}
}

func (p *Proxy) accept() {
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return
		}
		go p.handle(client)
	}
}

func (p *Proxy) handle(client net.Conn) {
	p.mu.Lock()
	refusing, delay := p.refusing, p.connectDelay
	p.mu.Unlock()
	if refusing {
		_ = client.Close()
		return
	}
	if delay > 0 {
		time.Sleep(delay)
	}
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client, server) {
		_ = client.Close()
		_ = server.Close()
		return
	}
	defer p.untrack(client, server)
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(server, client)
		done <- struct{}{}
	}()
	go func() {
		p.replies(server, client)
		done <- struct{}{}
	}()
	<-done
}

// replies forwards server-to-client frame by frame, so a response can be held or
// dropped whole.
func (p *Proxy) replies(server, client net.Conn) {
	replied := map[uint32]bool{} // streams whose response has begun
	header := make([]byte, 9)
	// The client's connection preface is answered by the server's SETTINGS frame
	// (stream 0), which is passed on like every frame of stream 0.
	for {
		if _, err := io.ReadFull(server, header); err != nil {
			return
		}
		length := int(header[0])<<16 | int(header[1])<<8 | int(header[2])
		payload := make([]byte, length)
		if _, err := io.ReadFull(server, payload); err != nil {
			return
		}
		stream := binary.BigEndian.Uint32(header[5:9]) & 0x7fffffff
		if header[3] == http2Headers && stream != 0 {
			p.mu.Lock()
			drop := p.dropsArmed > 0
			var hold time.Duration
			if drop {
				p.dropsArmed--
				p.dropped++
			} else if !replied[stream] && len(p.delays) > 0 {
				hold = p.delays[0]
				p.delays = p.delays[1:]
				p.delayed++
			}
			p.mu.Unlock()
			if drop {
				_ = client.Close()
				_ = server.Close()
				return
			}
			replied[stream] = true
			if hold > 0 {
				time.Sleep(hold)
			}
		}
		if _, err := client.Write(append(header, payload...)); err != nil {
			return
		}
	}
}
