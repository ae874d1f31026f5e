// Package security holds the security settings of Baton's connections,
// shared by baton-worker and baton: ZooKeeper digest credentials, and
// Temporal TLS, mTLS and API key. Each comes with its command-line flags.
//
// Secrets are read from files or from the environment, never from the
// command line (where ps and shell histories would show them): a flag names
// the file holding the secret (--zk-auth-file, --temporal-api-key-file,
// --temporal-tls-key-file), or the secret itself is in an environment
// variable (BATON_ZK_AUTH, BATON_TEMPORAL_API_KEY). Giving both the file
// and the variable is an error. Errors name the flag and the file, never
// the secret.
package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
)

// Environment variables holding secrets themselves (not flags).
const (
	// EnvZKAuth holds ZooKeeper digest credentials, user:password.
	EnvZKAuth = "BATON_ZK_AUTH"
	// EnvTemporalAPIKey holds a Temporal API key.
	EnvTemporalAPIKey = "BATON_TEMPORAL_API_KEY"
)

// Flag names.
const (
	FlagZKAuthFile            = "zk-auth-file"
	FlagTemporalTLS           = "temporal-tls"
	FlagTemporalTLSCAFile     = "temporal-tls-ca-file"
	FlagTemporalTLSCertFile   = "temporal-tls-cert-file"
	FlagTemporalTLSKeyFile    = "temporal-tls-key-file"
	FlagTemporalTLSServerName = "temporal-tls-server-name"
	FlagTemporalAPIKeyFile    = "temporal-api-key-file"
)

// ZooKeeper is the ZooKeeper authentication setting.
type ZooKeeper struct {
	// AuthFile is a file holding digest credentials user:password.
	AuthFile string
}

// AddFlags registers --zk-auth-file on fs.
func (z *ZooKeeper) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&z.AuthFile, FlagZKAuthFile, z.AuthFile,
		"file holding ZooKeeper digest credentials user:password, or put them in $"+EnvZKAuth+
			" (a secret: never on the command line); when set, Baton's znodes get an ACL for that user only")
}

// Auth returns the digest credentials user:password from --zk-auth-file
// or $BATON_ZK_AUTH, or "" when neither is set (no authentication).
func (z ZooKeeper) Auth() (string, error) {
	auth, err := readSecret(FlagZKAuthFile, z.AuthFile, EnvZKAuth)
	if err != nil || auth == "" {
		return auth, err
	}
	if u, p, ok := strings.Cut(auth, ":"); !ok || u == "" || p == "" {
		return "", fmt.Errorf("%s: want user:password with a non-empty user and password", source(FlagZKAuthFile, z.AuthFile, EnvZKAuth))
	}
	return auth, nil
}

// Temporal is the TLS and API key setting of a Temporal client.
type Temporal struct {
	// TLS connects over TLS; the other TLS fields imply it.
	TLS bool
	// CAFile is a PEM bundle of CAs to verify the server with (default:
	// the system's roots).
	CAFile string
	// CertFile and KeyFile are the PEM client certificate and its key,
	// for mutual TLS. They go together.
	CertFile, KeyFile string
	// ServerName is the name the server certificate is verified against
	// (default: the host of the address).
	ServerName string
	// APIKeyFile is a file holding an API key (or $BATON_TEMPORAL_API_KEY).
	APIKeyFile string
}

// AddFlags registers the --temporal-tls* and --temporal-api-key-file
// flags on fs.
func (t *Temporal) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&t.TLS, FlagTemporalTLS, t.TLS,
		"connect to Temporal over TLS (the system's CAs unless --"+FlagTemporalTLSCAFile+"); implied by the other --temporal-tls-* flags and by an API key")
	fs.StringVar(&t.CAFile, FlagTemporalTLSCAFile, t.CAFile, "PEM file of the CA(s) that signed the Temporal server's certificate")
	fs.StringVar(&t.CertFile, FlagTemporalTLSCertFile, t.CertFile,
		"PEM client certificate for mutual TLS (with --"+FlagTemporalTLSKeyFile+")")
	fs.StringVar(&t.KeyFile, FlagTemporalTLSKeyFile, t.KeyFile,
		"PEM private key of the client certificate (a secret: keep the file readable by Baton only)")
	fs.StringVar(&t.ServerName, FlagTemporalTLSServerName, t.ServerName,
		"name to verify the Temporal server's certificate against (default: the host of --temporal-address)")
	fs.StringVar(&t.APIKeyFile, FlagTemporalAPIKeyFile, t.APIKeyFile,
		"file holding a Temporal API key, or put the key in $"+EnvTemporalAPIKey+
			" (a secret: never on the command line); sent as a bearer token, turns TLS on")
}

// TLSEnabled reports whether TLS was asked for, explicitly or by another
// TLS flag.
func (t Temporal) TLSEnabled() bool {
	return t.TLS || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != ""
}

// TLSConfig builds the client's TLS configuration, or returns nil when TLS
// is not enabled. Errors name the flag and the file.
func (t Temporal) TLSConfig() (*tls.Config, error) {
	if !t.TLSEnabled() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--%s %s: %w", FlagTemporalTLSCAFile, t.CAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--%s %s: no PEM certificate in the file", FlagTemporalTLSCAFile, t.CAFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case t.CertFile == "" && t.KeyFile == "":
	case t.CertFile == "":
		return nil, fmt.Errorf("--%s %s: needs --%s (mutual TLS takes a certificate and its key)",
			FlagTemporalTLSKeyFile, t.KeyFile, FlagTemporalTLSCertFile)
	case t.KeyFile == "":
		return nil, fmt.Errorf("--%s %s: needs --%s (mutual TLS takes a certificate and its key)",
			FlagTemporalTLSCertFile, t.CertFile, FlagTemporalTLSKeyFile)
	default:
		certPEM, err := os.ReadFile(t.CertFile)
		if err != nil {
			return nil, fmt.Errorf("--%s %s: %w", FlagTemporalTLSCertFile, t.CertFile, err)
		}
		keyPEM, err := os.ReadFile(t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--%s %s: %w", FlagTemporalTLSKeyFile, t.KeyFile, err)
		}
		// crypto/tls never puts key material in its errors.
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("--%s %s, --%s %s: %w", FlagTemporalTLSCertFile, t.CertFile,
				FlagTemporalTLSKeyFile, t.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// APIKey returns the API key from --temporal-api-key-file or
// $BATON_TEMPORAL_API_KEY, or "" when neither is set.
func (t Temporal) APIKey() (string, error) {
	key, err := readSecret(FlagTemporalAPIKeyFile, t.APIKeyFile, EnvTemporalAPIKey)
	if err == nil && strings.ContainsAny(key, "\r\n") {
		return "", fmt.Errorf("%s: the API key spans several lines", source(FlagTemporalAPIKeyFile, t.APIKeyFile, EnvTemporalAPIKey))
	}
	return key, err
}

// Apply sets the client options' TLS configuration and API key
// credentials. With an API key and no TLS flag, the SDK turns TLS on with
// the system's CAs.
func (t Temporal) Apply(o *client.Options) error {
	cfg, err := t.TLSConfig()
	if err != nil {
		return err
	}
	if cfg != nil {
		o.ConnectionOptions.TLS = cfg
	}
	key, err := t.APIKey()
	if err != nil {
		return err
	}
	if key != "" {
		o.Credentials = client.NewAPIKeyStaticCredentials(key)
	}
	return nil
}

// Check reads the files and the environment and returns the first
// problem, so that a bad setting fails before any connection is tried.
func (z ZooKeeper) Check() error {
	_, err := z.Auth()
	return err
}

// Check reads the files and the environment and returns the first
// problem, so that a bad setting fails before any connection is tried.
func (t Temporal) Check() error {
	return t.Apply(&client.Options{})
}

// readSecret reads a secret from file (named by flag) or from the
// environment variable env; "" when neither is set. Surrounding white
// space (a file's final newline) is removed.
func readSecret(flag, file, env string) (string, error) {
	fromEnv := strings.TrimSpace(os.Getenv(env))
	if file != "" && fromEnv != "" {
		return "", fmt.Errorf("--%s and $%s are both set: give the secret one way", flag, env)
	}
	if file == "" {
		return fromEnv, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--%s %s: %w", flag, file, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("--%s %s: %w", flag, file, errEmpty)
	}
	return s, nil
}

var errEmpty = errors.New("the file is empty")

// source names where a secret came from, for errors.
func source(flag, file, env string) string {
	if file != "" {
		return fmt.Sprintf("--%s %s", flag, file)
	}
	return "$" + env
}

// EnvStorePassword holds the job store's (PostgreSQL's) password.
const EnvStorePassword = "BATON_STORE_PASSWORD"

// FlagStorePasswordFile names the file holding the job store's password.
const FlagStorePasswordFile = "store-password-file"

// Store is the job store's authentication setting (PostgreSQL).
type Store struct {
	// PasswordFile is a file holding the password.
	PasswordFile string
}

// AddFlags registers --store-password-file on fs.
func (s *Store) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&s.PasswordFile, FlagStorePasswordFile, s.PasswordFile,
		"file holding the PostgreSQL password of --store, or put it in $"+EnvStorePassword+" (a secret: never on the command line)")
}

// Password returns the store password from --store-password-file or
// $BATON_STORE_PASSWORD, or "" (the DSN's, or none).
func (s Store) Password() (string, error) {
	return readSecret(FlagStorePasswordFile, s.PasswordFile, EnvStorePassword)
}
