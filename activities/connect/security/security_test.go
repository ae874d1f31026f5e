package security

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// pki is a throw-away CA with a server and a client certificate, written
// as PEM files.
type pki struct {
	dir                       string
	caFile, certFile, keyFile string // CA, client certificate and key
	serverCert                tls.Certificate
	caPool                    *x509.CertPool
	clientCN                  string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir(), clientCN: "baton-worker"}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Baton test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	p.caPool = x509.NewCertPool()
	p.caPool.AddCert(ca)

	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, dns []string, ips []net.IP) ([]byte, []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: dns, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		require.NoError(t, err)
		keyDER, err := x509.MarshalECPrivateKey(key)
		require.NoError(t, err)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	}
	srvCert, srvKey := issue(2, "temporal.test", x509.ExtKeyUsageServerAuth, []string{"temporal.test"}, nil)
	p.serverCert, err = tls.X509KeyPair(srvCert, srvKey)
	require.NoError(t, err)
	cliCert, cliKey := issue(3, p.clientCN, x509.ExtKeyUsageClientAuth, nil, nil)

	p.caFile = p.write(t, "ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	p.certFile = p.write(t, "client.pem", cliCert)
	p.keyFile = p.write(t, "client-key.pem", cliKey)
	return p
}

func (p *pki) write(t *testing.T, name string, data []byte) string {
	t.Helper()
	f := filepath.Join(p.dir, name)
	require.NoError(t, os.WriteFile(f, data, 0o600))
	return f
}

func TestTLSConfig(t *testing.T) {
	p := newPKI(t)
	tc := Temporal{CAFile: p.caFile, CertFile: p.certFile, KeyFile: p.keyFile, ServerName: "temporal.test"}
	require.True(t, tc.TLSEnabled(), "TLS files imply --temporal-tls")
	cfg, err := tc.TLSConfig()
	require.NoError(t, err)
	require.NotNil(t, cfg)
	assert.Equal(t, "temporal.test", cfg.ServerName)
	assert.Equal(t, uint16(tls.VersionTLS12), cfg.MinVersion)
	assert.False(t, cfg.InsecureSkipVerify)
	require.True(t, cfg.RootCAs.Equal(p.caPool), "RootCAs is exactly the CA file")
	require.Len(t, cfg.Certificates, 1)
	leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	require.NoError(t, err)
	assert.Equal(t, p.clientCN, leaf.Subject.CommonName)
	// The client certificate verifies against the CA for client auth.
	_, err = leaf.Verify(x509.VerifyOptions{Roots: cfg.RootCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)

	// --temporal-tls alone: system roots, no client certificate.
	cfg, err = Temporal{TLS: true}.TLSConfig()
	require.NoError(t, err)
	require.NotNil(t, cfg)
	assert.Nil(t, cfg.RootCAs)
	assert.Empty(t, cfg.Certificates)

	// Nothing set: no TLS.
	cfg, err = Temporal{}.TLSConfig()
	require.NoError(t, err)
	assert.Nil(t, cfg)
	var o client.Options
	require.NoError(t, Temporal{}.Apply(&o))
	assert.Nil(t, o.ConnectionOptions.TLS)
	assert.Nil(t, o.Credentials)
}

func TestTLSConfigErrors(t *testing.T) {
	p := newPKI(t)
	missing := filepath.Join(p.dir, "missing.pem")
	garbage := p.write(t, "garbage.pem", []byte("not a PEM file\n"))
	for _, tc := range []struct {
		name string
		cfg  Temporal
		want []string // every one is in the error
	}{
		{"missing CA", Temporal{CAFile: missing}, []string{"--temporal-tls-ca-file", missing, "no such file"}},
		{"garbage CA", Temporal{CAFile: garbage}, []string{"--temporal-tls-ca-file", garbage, "no PEM certificate"}},
		{"missing cert", Temporal{CertFile: missing, KeyFile: p.keyFile}, []string{"--temporal-tls-cert-file", missing}},
		{"missing key", Temporal{CertFile: p.certFile, KeyFile: missing}, []string{"--temporal-tls-key-file", missing}},
		{"garbage cert", Temporal{CertFile: garbage, KeyFile: p.keyFile}, []string{"--temporal-tls-cert-file", garbage, "--temporal-tls-key-file", p.keyFile}},
		{"garbage key", Temporal{CertFile: p.certFile, KeyFile: garbage}, []string{"--temporal-tls-key-file", garbage}},
		{"key is the CA", Temporal{CertFile: p.certFile, KeyFile: p.caFile}, []string{"--temporal-tls-key-file", p.caFile}},
		{"cert without key", Temporal{CertFile: p.certFile}, []string{"--temporal-tls-cert-file", p.certFile, "needs --temporal-tls-key-file"}},
		{"key without cert", Temporal{KeyFile: p.keyFile}, []string{"--temporal-tls-key-file", p.keyFile, "needs --temporal-tls-cert-file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.TLSConfig()
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			var o client.Options
			require.Error(t, tc.cfg.Apply(&o), "Apply fails the same way")
		})
	}
	// The private key never ends up in an error.
	key, err := os.ReadFile(p.keyFile)
	require.NoError(t, err)
	_, err = Temporal{CertFile: p.caFile, KeyFile: p.keyFile}.TLSConfig()
	require.Error(t, err)
	assert.NotContains(t, err.Error(), strings.Split(string(key), "\n")[1])
}

func TestAPIKey(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "api-key")
	require.NoError(t, os.WriteFile(keyFile, []byte("key-from-file\n"), 0o600))
	t.Setenv(EnvTemporalAPIKey, "")

	k, err := Temporal{APIKeyFile: keyFile}.APIKey()
	require.NoError(t, err)
	assert.Equal(t, "key-from-file", k, "the final newline is dropped")

	t.Setenv(EnvTemporalAPIKey, "key-from-env")
	k, err = Temporal{}.APIKey()
	require.NoError(t, err)
	assert.Equal(t, "key-from-env", k)
	_, err = Temporal{APIKeyFile: keyFile}.APIKey()
	require.ErrorContains(t, err, "both set")
	assert.NotContains(t, err.Error(), "key-from")

	t.Setenv(EnvTemporalAPIKey, "")
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	_, err = Temporal{APIKeyFile: empty}.APIKey()
	require.ErrorContains(t, err, "--temporal-api-key-file "+empty+": the file is empty")
	_, err = Temporal{APIKeyFile: filepath.Join(dir, "nope")}.APIKey()
	require.ErrorContains(t, err, "--temporal-api-key-file "+filepath.Join(dir, "nope"))
	two := filepath.Join(dir, "two")
	require.NoError(t, os.WriteFile(two, []byte("a\nb\n"), 0o600))
	_, err = Temporal{APIKeyFile: two}.APIKey()
	require.ErrorContains(t, err, "several lines")

	var o client.Options
	require.NoError(t, Temporal{APIKeyFile: keyFile}.Apply(&o))
	assert.NotNil(t, o.Credentials)
	assert.Nil(t, o.ConnectionOptions.TLS, "TLS is left to the SDK, which turns it on for an API key")
}

func TestZooKeeperAuth(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "zk-auth")
	require.NoError(t, os.WriteFile(f, []byte("baton:pa:ss\n"), 0o600))
	t.Setenv(EnvZKAuth, "")

	a, err := ZooKeeper{}.Auth()
	require.NoError(t, err)
	assert.Empty(t, a, "no credentials: no authentication")
	a, err = ZooKeeper{AuthFile: f}.Auth()
	require.NoError(t, err)
	assert.Equal(t, "baton:pa:ss", a)

	t.Setenv(EnvZKAuth, "env:secret")
	a, err = ZooKeeper{}.Auth()
	require.NoError(t, err)
	assert.Equal(t, "env:secret", a)
	_, err = ZooKeeper{AuthFile: f}.Auth()
	require.ErrorContains(t, err, "--zk-auth-file and $BATON_ZK_AUTH are both set")

	t.Setenv(EnvZKAuth, "nocolonsecret")
	_, err = ZooKeeper{}.Auth()
	require.ErrorContains(t, err, "$BATON_ZK_AUTH: want user:password")
	assert.NotContains(t, err.Error(), "nocolonsecret")

	t.Setenv(EnvZKAuth, "")
	missing := filepath.Join(dir, "missing")
	_, err = ZooKeeper{AuthFile: missing}.Auth()
	require.ErrorContains(t, err, "--zk-auth-file "+missing)
}

func TestFlags(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	var z ZooKeeper
	var tc Temporal
	z.AddFlags(fs)
	tc.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--zk-auth-file", "/z", "--temporal-tls", "--temporal-tls-ca-file", "/ca",
		"--temporal-tls-cert-file", "/c", "--temporal-tls-key-file", "/k", "--temporal-tls-server-name", "s",
		"--temporal-api-key-file", "/a"}))
	assert.Equal(t, ZooKeeper{AuthFile: "/z"}, z)
	assert.Equal(t, Temporal{TLS: true, CAFile: "/ca", CertFile: "/c", KeyFile: "/k", ServerName: "s", APIKeyFile: "/a"}, tc)
	// No flag takes a secret itself, and the help says so.
	fs.VisitAll(func(f *pflag.Flag) {
		assert.NotContains(t, []string{"zk-auth", "temporal-api-key", "zk-password"}, f.Name)
	})
	for _, name := range []string{FlagZKAuthFile, FlagTemporalAPIKeyFile} {
		assert.Contains(t, fs.Lookup(name).Usage, "never on the command line")
	}
}

// recorder is a Temporal frontend that answers GetSystemInfo and records
// what the client sent.
type recorder struct {
	workflowservice.UnimplementedWorkflowServiceServer
	mu       sync.Mutex
	auth     []string
	clientCN string
}

func (r *recorder) GetSystemInfo(ctx context.Context, _ *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	md, _ := metadata.FromIncomingContext(ctx)
	r.auth = md.Get("authorization")
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
			r.clientCN = ti.State.PeerCertificates[0].Subject.CommonName
		}
	}
	return &workflowservice.GetSystemInfoResponse{Capabilities: &workflowservice.GetSystemInfoResponse_Capabilities{}}, nil
}

// TestDialMutualTLS dials a loopback gRPC server that requires a client
// certificate signed by the test CA (mutual TLS), with the client options
// built by Apply: the handshake verifies the server as "temporal.test",
// the server sees the client certificate and the API key as a bearer
// token. Without the client certificate the dial fails.
func TestDialMutualTLS(t *testing.T) {
	p := newPKI(t)
	rec := &recorder{}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{p.serverCert}, ClientCAs: p.caPool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	})))
	workflowservice.RegisterWorkflowServiceServer(srv, rec)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	keyFile := filepath.Join(t.TempDir(), "api-key")
	require.NoError(t, os.WriteFile(keyFile, []byte("test-api-key\n"), 0o600))
	t.Setenv(EnvTemporalAPIKey, "")
	dial := func(tc Temporal) error {
		o := client.Options{HostPort: ln.Addr().String(), Namespace: "default"}
		require.NoError(t, tc.Apply(&o))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := client.DialContext(ctx, o)
		if err == nil {
			c.Close()
		}
		return err
	}

	require.NoError(t, dial(Temporal{CAFile: p.caFile, CertFile: p.certFile, KeyFile: p.keyFile,
		ServerName: "temporal.test", APIKeyFile: keyFile}))
	rec.mu.Lock()
	assert.Equal(t, []string{"Bearer test-api-key"}, rec.auth)
	assert.Equal(t, p.clientCN, rec.clientCN)
	rec.mu.Unlock()

	require.Error(t, dial(Temporal{CAFile: p.caFile, ServerName: "temporal.test"}), "no client certificate")
	require.Error(t, dial(Temporal{CAFile: p.caFile, CertFile: p.certFile, KeyFile: p.keyFile}),
		"the server certificate is for temporal.test, not 127.0.0.1")
	require.Error(t, dial(Temporal{CertFile: p.certFile, KeyFile: p.keyFile, ServerName: "temporal.test"}),
		"the system's CAs do not know the test CA")
}
