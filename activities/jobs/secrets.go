package jobs

import (
	"crypto/cipher"
	"crypto/hpke"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/batoncrawl/baton/activities/connect/security"
	"github.com/batoncrawl/baton/activities/crawl"
)

// Secrets are the parts of a job that open doors on other sites: its
// cookies, its authorization, its request headers and the proxy's
// credentials. They never travel with the Spec (a workflow's input, an
// activity's, the jobs table): the submitter seals them with the group's
// secrets key (Sealer) into the store's secrets table, and a Runner opens
// them when it loads the job (Spec.Secrets names them, without values).
type Secrets struct {
	Cookie        map[string]string `json:"cookie,omitempty"`
	Authorization map[string]string `json:"authorization,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	// ProxyUserinfo is the proxy URL's user:password.
	ProxyUserinfo string `json:"proxy_userinfo,omitempty"`
	// URLs are the seeds' user:password and secret query parameters
	// (--secret-params): the spec's URLs carry crawl.Redacted instead.
	URLs []crawl.URLSecret `json:"urls,omitempty"`
	// CrawlerOptions are the --set values of the keys the job's crawler
	// declares secret (crawler.SecretSetting).
	CrawlerOptions map[string]string `json:"crawler_options,omitempty"`
}

// Empty reports whether there is no secret.
func (s Secrets) Empty() bool {
	return len(s.Cookie) == 0 && len(s.Authorization) == 0 && len(s.Headers) == 0 && s.ProxyUserinfo == "" &&
		len(s.URLs) == 0 && len(s.CrawlerOptions) == 0
}

// Names lists what the secrets are without their values, for the Spec
// and for people: "cookie session", "authorization Bearer", "header
// X-Trace", "proxy credentials".
func (s Secrets) Names() []string {
	var out []string
	add := func(kind string, m map[string]string) {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		for _, k := range ks {
			out = append(out, kind+" "+k)
		}
	}
	add("cookie", s.Cookie)
	add("authorization", s.Authorization)
	add("header", s.Headers)
	if s.ProxyUserinfo != "" {
		out = append(out, "proxy credentials")
	}
	for _, u := range s.URLs {
		if u.Param == "" {
			out = append(out, "user:password of "+u.Origin)
		} else {
			out = append(out, "parameter "+u.Param+" of "+u.Origin)
		}
	}
	add("setting", s.CrawlerOptions)
	return out
}

// Values lists every secret value (for tests and log scrubbing).
func (s Secrets) Values() []string {
	var out []string
	for _, u := range s.URLs {
		out = append(out, u.Value)
		if _, pw, ok := strings.Cut(u.Value, ":"); ok && u.Param == "" && pw != "" {
			out = append(out, pw)
		}
	}
	for _, m := range []map[string]string{s.Cookie, s.Authorization, s.Headers, s.CrawlerOptions} {
		for _, v := range m {
			out = append(out, v)
		}
	}
	if s.ProxyUserinfo != "" {
		out = append(out, s.ProxyUserinfo)
		if _, pw, ok := strings.Cut(s.ProxyUserinfo, ":"); ok && pw != "" {
			out = append(out, pw)
		}
	}
	return out
}

// SplitSecrets moves a spec's secrets out of it: the spec returned keeps
// their names (Spec.Secrets) and no value, and can go anywhere.
func SplitSecrets(spec Spec) (Spec, Secrets) {
	var s Secrets
	s.Cookie, spec.Cookie = spec.Cookie, nil
	s.Authorization, spec.Authorization = spec.Authorization, nil
	s.Headers, spec.Options.Headers = spec.Options.Headers, nil
	if spec.Options.Proxy != "" {
		if u, err := url.Parse(spec.Options.Proxy); err == nil && u.User != nil {
			s.ProxyUserinfo = u.User.String()
			u.User = nil
			spec.Options.Proxy = u.String()
		}
	}
	spec.Secrets = s.Names()
	return spec, s
}

// Apply puts secrets back into a spec (in a Runner's memory only).
func (s Secrets) Apply(spec Spec) Spec {
	if len(s.Cookie) > 0 {
		spec.Cookie = s.Cookie
	}
	if len(s.Authorization) > 0 {
		spec.Authorization = s.Authorization
	}
	if len(s.Headers) > 0 {
		spec.Options.Headers = s.Headers
	}
	spec.URLSecrets = crawl.NewURLSecrets(s.URLs)
	if len(s.CrawlerOptions) > 0 {
		opts := make(map[string]string, len(spec.CrawlerOptions)+len(s.CrawlerOptions))
		maps.Copy(opts, spec.CrawlerOptions)
		maps.Copy(opts, s.CrawlerOptions)
		spec.CrawlerOptions = opts
	}
	if s.ProxyUserinfo != "" && spec.Options.Proxy != "" {
		if u, err := url.Parse(spec.Options.Proxy); err == nil {
			user, pw, hasPw := strings.Cut(s.ProxyUserinfo, ":")
			if user, err = url.PathUnescape(user); err == nil {
				if pw, err = url.PathUnescape(pw); err == nil {
					if hasPw {
						u.User = url.UserPassword(user, pw)
					} else {
						u.User = url.User(user)
					}
					spec.Options.Proxy = u.String()
				}
			}
		}
	}
	return spec
}

// SecretsKeyBytes is the size of a secrets key: AES-256.
const SecretsKeyBytes = 32

// Sentinel errors of the secrets key.
var (
	// ErrNoSecretsKey: the key file does not exist.
	ErrNoSecretsKey = errors.New("no secrets key")
	// ErrSecretsKey: the secrets were sealed with another key, or were
	// changed.
	ErrSecretsKey = errors.New("secrets cannot be opened with this key")
	// ErrNoSecrets: the job has no sealed secrets in the store.
	ErrNoSecrets = errors.New("no secrets stored for the job")
)

// Sealer seals and opens a job's Secrets with the group's key pair (see
// envelope.go: a data key per job, wrapped for the group's public key;
// the job's ID binds both, so sealed secrets cannot be moved to another
// job). A Sealer of a private key (NewSealer: the workers' key file)
// seals and opens; one of the public key alone (NewPublicSealer: what a
// submitter needs) only seals. Safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD // the earlier format's: sealed directly with the key
	priv hpke.PrivateKey
	pub  []byte
	id   string
}

// NewSealer makes a Sealer of a 32-byte private key.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != SecretsKeyBytes {
		return nil, fmt.Errorf("secrets key: %d bytes, want %d", len(key), SecretsKeyBytes)
	}
	aead, id, err := security.AES256GCM(key, "baton secrets key id\x00", 6)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	priv, pub, err := publicKeyOf(key)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	return &Sealer{aead: aead, priv: priv, pub: pub, id: id}, nil
}

// NewPublicSealer makes a Sealer that only seals, for the group's public
// key pub (PublicKey) of the key keyID.
func NewPublicSealer(keyID string, pub []byte) (*Sealer, error) {
	if _, err := hpkeKEM.NewPublicKey(pub); err != nil {
		return nil, fmt.Errorf("the group's public secrets key: %w", err)
	}
	return &Sealer{pub: pub, id: keyID}, nil
}

// KeyID names the key (a hash of it, not the key): the store keeps it with
// sealed secrets, ZooKeeper with the group, so a mismatch is named.
func (s *Sealer) KeyID() string { return s.id }

// PublicKey is the group's public key: what a submitter seals with.
func (s *Sealer) PublicKey() []byte { return s.pub }

// Seal encrypts secrets for job under a fresh data key of its own.
func (s *Sealer) Seal(job string, sec Secrets) ([]byte, error) {
	plain, err := json.Marshal(sec)
	if err != nil {
		return nil, err
	}
	return sealEnvelope(s.pub, job, plain)
}

// Open decrypts job's sealed secrets, of either format; ErrSecretsKey if
// the key is not the one they were sealed for (or they were changed).
func (s *Sealer) Open(job string, sealed []byte) (Secrets, error) {
	var sec Secrets
	plain, err := s.open(job, sealed)
	if err != nil {
		return sec, err
	}
	if err := json.Unmarshal(plain, &sec); err != nil {
		return sec, fmt.Errorf("job %s: sealed secrets: %w", job, err)
	}
	return sec, nil
}

func (s *Sealer) open(job string, sealed []byte) ([]byte, error) {
	if s.priv == nil {
		return nil, fmt.Errorf("job %s: the group's public key opens nothing: %w", job, ErrSecretsKey)
	}
	wrapped, data, ok, err := envelope(sealed)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", job, err)
	}
	if ok {
		return openEnvelope(s.priv, job, wrapped, data)
	}
	n := s.aead.NonceSize()
	if len(sealed) < n+s.aead.Overhead() {
		return nil, fmt.Errorf("job %s: sealed secrets of %d bytes: %w", job, len(sealed), ErrSecretsKey)
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(job))
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", job, ErrSecretsKey)
	}
	return plain, nil
}

// Rewrap returns job's sealed secrets for the key of to: the data key
// unwrapped with s and wrapped for to, the sealed data unchanged. Secrets
// of the earlier format (sealed directly with the group's key) are
// sealed again in an envelope.
func (s *Sealer) Rewrap(job string, sealed []byte, to *Sealer) ([]byte, error) {
	wrapped, data, ok, err := envelope(sealed)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", job, err)
	}
	if !ok {
		plain, err := s.open(job, sealed)
		if err != nil {
			return nil, err
		}
		return sealEnvelope(to.pub, job, plain)
	}
	if s.priv == nil {
		return nil, fmt.Errorf("job %s: the group's public key opens nothing: %w", job, ErrSecretsKey)
	}
	dk, err := hpke.Open(s.priv, hpkeKDF, hpkeAEAD, wrapInfo(job), wrapped)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", job, ErrSecretsKey)
	}
	pk, err := hpkeKEM.NewPublicKey(to.pub)
	if err != nil {
		return nil, err
	}
	if wrapped, err = hpke.Seal(pk, hpkeKDF, hpkeAEAD, wrapInfo(job), dk); err != nil {
		return nil, err
	}
	return frame(wrapped, data), nil
}

// DefaultSecretsKeyFile is the secrets key's file in a data directory.
const DefaultSecretsKeyFile = "secrets.key"

// LoadSecretsKey reads a key file: the key in hex (64 characters, a
// trailing newline allowed). A file others may read is refused.
func LoadSecretsKey(path string) (*Sealer, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("secrets key %s: %w", path, ErrNoSecretsKey)
	}
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secrets key %s: mode %v lets others read it: chmod 600 it", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(key) != SecretsKeyBytes {
		return nil, fmt.Errorf("secrets key %s: want %d hex characters (openssl rand -hex %d)", path, 2*SecretsKeyBytes, SecretsKeyBytes)
	}
	return NewSealer(key)
}

// EnsureSecretsKey loads the key file, creating it (0600, a new random key)
// if it does not exist; created reports whether it did.
func EnsureSecretsKey(path string) (s *Sealer, created bool, err error) {
	s, err = LoadSecretsKey(path)
	if !errors.Is(err, ErrNoSecretsKey) {
		return s, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("secrets key: %w", err)
	}
	key := make([]byte, SecretsKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, false, err
	}
	// Written whole to a temporary file, then linked into place: another
	// process of this host starting at the same moment reads either no
	// file or the whole key, and the first link wins.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secrets-key-*")
	if err != nil {
		return nil, false, fmt.Errorf("secrets key: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(hex.EncodeToString(key) + "\n")
	if werr == nil {
		werr = tmp.Chmod(0o600)
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Link(tmp.Name(), path)
	}
	if errors.Is(werr, fs.ErrExist) {
		s, err = LoadSecretsKey(path) // another process of this host made it first
		return s, false, err
	}
	if werr != nil {
		return nil, false, fmt.Errorf("secrets key %s: %w", path, werr)
	}
	s, err = NewSealer(key)
	return s, err == nil, err
}
