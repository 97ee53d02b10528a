package idemd

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"google.golang.org/grpc"
)

// The environment variables New reads when no option gives the address or token.
const (
	EnvAddr  = "IDEMD_ADDR"
	EnvToken = "IDEMD_TOKEN"
)

// ErrEmptyToken is New's answer to an empty bearer token: every RPC needs one, and a
// client without it would fail each call as UNAUTHENTICATED instead of at once.
var ErrEmptyToken = errors.New("idemd: empty token: pass idemd.WithToken or set " + EnvToken +
	" (every RPC needs `authorization: Bearer <token>`; `idemd tenant create` prints one)")

// Option configures New.
type Option func(*clientConfig)

type clientConfig struct {
	addr, token   string
	addrSet       bool
	tokenSet      bool
	tlsConfig     *tls.Config
	rootCAs       *x509.CertPool
	caFile        string
	certificates  []tls.Certificate
	certFile      string
	keyFile       string
	retry         RetryPolicy
	dialOptions   []grpc.DialOption
	conn          *grpc.ClientConn
	wantsTLSSetup bool
}

// WithAddress is idemd's address: `host:port` (plaintext unless a TLS option is
// given), `http://host:port` (plaintext) or `https://host:port` (TLS). Default: the
// IDEMD_ADDR environment variable.
func WithAddress(addr string) Option {
	return func(c *clientConfig) { c.addr, c.addrSet = addr, true }
}

// WithToken is the bearer token sent on every call (`idemd tenant create` prints
// one). Default: the IDEMD_TOKEN environment variable. An empty token is refused.
func WithToken(token string) Option {
	return func(c *clientConfig) { c.token, c.tokenSet = token, true }
}

// WithTLSConfig uses TLS with this configuration (copied; its NextProtos are gRPC's).
func WithTLSConfig(config *tls.Config) Option {
	return func(c *clientConfig) { c.tlsConfig, c.wantsTLSSetup = config.Clone(), true }
}

// WithRootCAs uses TLS and trusts these certificate authorities instead of the
// system's.
func WithRootCAs(pool *x509.CertPool) Option {
	return func(c *clientConfig) { c.rootCAs, c.wantsTLSSetup = pool, true }
}

// WithCAFile uses TLS and trusts the PEM certificate authorities in this file
// instead of the system's (a private CA).
func WithCAFile(path string) Option {
	return func(c *clientConfig) { c.caFile, c.wantsTLSSetup = path, true }
}

// WithClientCertificate uses TLS and presents this certificate to the server
// (mutual TLS).
func WithClientCertificate(certificate tls.Certificate) Option {
	return func(c *clientConfig) {
		c.certificates = append(c.certificates, certificate)
		c.wantsTLSSetup = true
	}
}

// WithClientCertificateFiles uses TLS and presents the PEM certificate (chain) and
// key in these files to the server (mutual TLS).
func WithClientCertificateFiles(certFile, keyFile string) Option {
	return func(c *clientConfig) { c.certFile, c.keyFile, c.wantsTLSSetup = certFile, keyFile, true }
}

// WithRetryPolicy replaces DefaultRetryPolicy.
func WithRetryPolicy(policy RetryPolicy) Option {
	return func(c *clientConfig) { c.retry = policy }
}

// WithDialOptions adds gRPC dial options (after the client's own, so they win).
func WithDialOptions(options ...grpc.DialOption) Option {
	return func(c *clientConfig) { c.dialOptions = append(c.dialOptions, options...) }
}

// WithConn uses a connection the caller made and closes (Close leaves it open); the
// address and TLS options are then not used. The token still goes on every call.
func WithConn(conn *grpc.ClientConn) Option {
	return func(c *clientConfig) { c.conn = conn }
}

// target is the address as gRPC dials it, and whether it asks for TLS.
type target struct {
	hostPort string
	tls      bool
	explicit bool // the scheme said which
}

// parseAddress accepts `host:port`, `http://host:port` and `https://host:port`.
func parseAddress(addr string) (target, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return target{}, fmt.Errorf("idemd: no address: pass idemd.WithAddress or set %s (host:port or http(s)://host:port)", EnvAddr)
	}
	if strings.Contains(addr, "://") {
		parsed, err := url.Parse(addr)
		if err != nil {
			return target{}, fmt.Errorf("idemd: address %q: %w", addr, err)
		}
		if parsed.Scheme != "http" && parsed.Scheme != "https" {
			return target{}, fmt.Errorf("idemd: address %q: the scheme is http or https, not %q", addr, parsed.Scheme)
		}
		if (parsed.Path != "" && parsed.Path != "/") || parsed.RawQuery != "" || parsed.User != nil {
			return target{}, fmt.Errorf("idemd: address %q: only a scheme, host and port are accepted", addr)
		}
		hostPort := parsed.Host
		if parsed.Port() == "" {
			port := "80"
			if parsed.Scheme == "https" {
				port = "443"
			}
			hostPort = net.JoinHostPort(parsed.Hostname(), port)
		}
		if parsed.Hostname() == "" {
			return target{}, fmt.Errorf("idemd: address %q has no host", addr)
		}
		return target{hostPort: hostPort, tls: parsed.Scheme == "https", explicit: true}, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return target{}, fmt.Errorf("idemd: address %q: expected host:port or http(s)://host:port", addr)
	}
	return target{hostPort: addr}, nil
}

// checkToken refuses what cannot be a bearer token before any call is made.
func checkToken(token string) error {
	if token == "" {
		return ErrEmptyToken
	}
	for _, r := range token {
		if r <= ' ' || r == 0x7f {
			return errors.New("idemd: the token contains whitespace or a control character (a newline read from a file?)")
		}
	}
	return nil
}

// resolve applies the environment defaults and checks what New needs.
func (c *clientConfig) resolve() (target, error) {
	if !c.tokenSet {
		c.token = os.Getenv(EnvToken)
	}
	if err := checkToken(c.token); err != nil {
		return target{}, err
	}
	if c.conn != nil {
		return target{}, nil
	}
	if !c.addrSet {
		c.addr = os.Getenv(EnvAddr)
	}
	t, err := parseAddress(c.addr)
	if err != nil {
		return target{}, err
	}
	if c.wantsTLSSetup {
		if t.explicit && !t.tls {
			return target{}, fmt.Errorf("idemd: address %q is plaintext (http://) but TLS options were given: use https://", c.addr)
		}
		t.tls = true
	}
	return t, nil
}

// buildTLS is the TLS configuration the options describe.
func (c *clientConfig) buildTLS() (*tls.Config, error) {
	config := c.tlsConfig
	if config == nil {
		config = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if c.rootCAs != nil {
		config.RootCAs = c.rootCAs
	}
	if c.caFile != "" {
		pem, err := os.ReadFile(c.caFile)
		if err != nil {
			return nil, fmt.Errorf("idemd: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("idemd: CA file %s holds no PEM certificate", c.caFile)
		}
		config.RootCAs = pool
	}
	if c.certFile != "" || c.keyFile != "" {
		certificate, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
		if err != nil {
			return nil, fmt.Errorf("idemd: client certificate: %w", err)
		}
		config.Certificates = append(config.Certificates, certificate)
	}
	config.Certificates = append(config.Certificates, c.certificates...)
	return config, nil
}
