package idemd_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	idemd "github.com/idemd/idemd/clients/go"
	"github.com/idemd/idemd/clients/go/idemv1"
	"github.com/idemd/idemd/clients/go/internal/idemdtest"
)

// The real server over TLS with a private CA: trusted through WithCAFile, refused
// with the system's roots.
func TestTLSWithAPrivateCA(t *testing.T) {
	ca := idemdtest.NewCA(t)
	serverCert := ca.Issue(t, "idemd", false)
	srv := idemdtest.Start(t, idemdtest.Embedded,
		"IDEMD_TLS_CERT="+serverCert.CertFile, "IDEMD_TLS_KEY="+serverCert.KeyFile)
	ctx := context.Background()

	client := connect(t, "https://"+srv.Addr, srv.Token, idemd.WithCAFile(ca.CertFile))
	claimed, err := client.Claim(ctx, claimJSON("payments.charge", idemdtest.Key(), paymentJSON, 5))
	if err != nil || claimed.GetAcquired() == nil {
		t.Fatalf("claim over TLS: %v %v", claimed, err)
	}
	// host:port with a TLS option is TLS too.
	pooled := connect(t, srv.Addr, srv.Token, idemd.WithRootCAs(ca.Pool()))
	if _, err := pooled.ListUnresolved(ctx, &idemv1.ListUnresolvedRequest{}); err != nil {
		t.Fatalf("list over TLS: %v", err)
	}

	policy := idemd.NoRetry
	untrusting := connect(t, "https://"+srv.Addr, srv.Token, idemd.WithRetryPolicy(policy))
	_, err = untrusting.ListUnresolved(ctx, &idemv1.ListUnresolvedRequest{})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("an unknown CA was trusted: %v", err)
	}
	plaintext := connect(t, "http://"+srv.Addr, srv.Token, idemd.WithRetryPolicy(policy))
	if _, err := plaintext.ListUnresolved(ctx, &idemv1.ListUnresolvedRequest{}); err == nil {
		t.Fatal("plaintext reached a TLS server")
	}
}

// idemd serves bearer tokens; a client certificate is for deployments whose proxy
// or mesh asks for one. A server that requires one sees the client's and the token.
type certificateEcho struct {
	idemv1.UnimplementedIdempotencyServiceServer
}

func (certificateEcho) Lookup(ctx context.Context, _ *idemv1.LookupRequest) (*idemv1.LookupResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	p, _ := peer.FromContext(ctx)
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return nil, status.Error(codes.Unauthenticated, "no client certificate")
	}
	return &idemv1.LookupResponse{Operation: &idemv1.Operation{
		OperationId: info.State.PeerCertificates[0].Subject.CommonName + "|" + strings.Join(md.Get("authorization"), ","),
	}}, nil
}

func TestAClientCertificateIsPresentedForMutualTLS(t *testing.T) {
	ca := idemdtest.NewCA(t)
	serverCert := ca.Issue(t, "server", false)
	clientCert := ca.Issue(t, "billing-service", true)
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{serverCert.Certificate},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.Pool(),
		MinVersion:   tls.VersionTLS12,
	})))
	idemv1.RegisterIdempotencyServiceServer(server, certificateEcho{})
	go func() { _ = server.Serve(listener) }()
	t.Cleanup(server.Stop)
	addr := "https://" + listener.Addr().String()
	request := &idemv1.LookupRequest{Target: &idemv1.LookupRequest_OperationId{OperationId: "x"}}

	for name, option := range map[string]idemd.Option{
		"files":       idemd.WithClientCertificateFiles(clientCert.CertFile, clientCert.KeyFile),
		"certificate": idemd.WithClientCertificate(clientCert.Certificate),
	} {
		client := connect(t, addr, "idem_token", idemd.WithCAFile(ca.CertFile), option)
		found, err := client.Lookup(context.Background(), request)
		if err != nil || found.GetOperation().GetOperationId() != "billing-service|Bearer idem_token" {
			t.Fatalf("%s: %v %v", name, found, err)
		}
	}
	anonymous := connect(t, addr, "idem_token", idemd.WithCAFile(ca.CertFile), idemd.WithRetryPolicy(idemd.NoRetry))
	if _, err := anonymous.Lookup(context.Background(), request); err == nil {
		t.Fatal("a server that requires a client certificate answered a client without one")
	}
	var unavailable *idemd.StatusError
	if _, err := anonymous.Lookup(context.Background(), request); !errors.As(err, &unavailable) {
		t.Fatalf("not a StatusError: %v", err)
	}
}
