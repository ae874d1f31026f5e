package jobs

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/rand"
	"encoding/binary"
	"fmt"
)

// A job's secrets are sealed in an envelope: a fresh data key of the job's
// own (AES-256-GCM, the job's ID as additional data) seals them, and the
// data key is wrapped for the group's key pair with HPKE (RFC 9180:
// DHKEM(X25519), HKDF-SHA256, AES-256-GCM). Sealing needs the group's
// public key only, so a submitter opens nothing; opening needs the
// private key, the workers' --secrets-key-file. A key rotation re-wraps
// the data keys (Sealer.Rewrap) and leaves the sealed data as it is.
//
// The sealed bytes are envelopeMagic, the wrapped key's length (2 bytes,
// big-endian), the wrapped key, then the data's nonce and ciphertext. A
// row without envelopeMagic is of the earlier format: sealed directly
// with the group's key (AES-256-GCM, the job's ID as additional data).
var envelopeMagic = []byte("\x00baton-envelope-1\x00")

var (
	hpkeKEM  = hpke.DHKEM(ecdh.X25519())
	hpkeKDF  = hpke.HKDFSHA256()
	hpkeAEAD = hpke.AES256GCM()
)

// wrapInfo binds a wrapped data key to its job.
func wrapInfo(job string) []byte { return []byte("baton job data key\x00" + job) }

// publicKeyOf is the group's HPKE public key of a private key's bytes.
func publicKeyOf(key []byte) (hpke.PrivateKey, []byte, error) {
	x, err := ecdh.X25519().NewPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	priv, err := hpke.NewDHKEMPrivateKey(x)
	if err != nil {
		return nil, nil, err
	}
	return priv, x.PublicKey().Bytes(), nil
}

// sealEnvelope seals plain for job under a fresh data key wrapped for pub.
func sealEnvelope(pub []byte, job string, plain []byte) ([]byte, error) {
	pk, err := hpkeKEM.NewPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("the group's public key: %w", err)
	}
	dk := make([]byte, SecretsKeyBytes)
	if _, err := rand.Read(dk); err != nil {
		return nil, err
	}
	wrapped, err := hpke.Seal(pk, hpkeKDF, hpkeAEAD, wrapInfo(job), dk)
	if err != nil {
		return nil, err
	}
	aead, err := dataAEAD(dk)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return aead.Seal(frame(wrapped, nonce), nonce, plain, []byte(job)), nil
}

// frame is the envelope's bytes: the magic, the wrapped data key, then
// rest (the sealed data).
func frame(wrapped, rest []byte) []byte {
	out := append(bytes.Clone(envelopeMagic), 0, 0)
	binary.BigEndian.PutUint16(out[len(envelopeMagic):], uint16(len(wrapped)))
	return append(append(out, wrapped...), rest...)
}

func dataAEAD(dk []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(dk)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// envelope splits sealed bytes of the envelope format into the wrapped
// data key and the sealed data; ok is false for the earlier format.
func envelope(sealed []byte) (wrapped, data []byte, ok bool, err error) {
	if !bytes.HasPrefix(sealed, envelopeMagic) {
		return nil, nil, false, nil
	}
	rest := sealed[len(envelopeMagic):]
	if len(rest) < 2 || len(rest)-2 < int(binary.BigEndian.Uint16(rest)) {
		return nil, nil, true, fmt.Errorf("sealed secrets of %d bytes: cut short: %w", len(sealed), ErrSecretsKey)
	}
	n := int(binary.BigEndian.Uint16(rest))
	return rest[2 : 2+n], rest[2+n:], true, nil
}

// openEnvelope unwraps the data key with priv and opens the data.
func openEnvelope(priv hpke.PrivateKey, job string, wrapped, data []byte) ([]byte, error) {
	dk, err := hpke.Open(priv, hpkeKDF, hpkeAEAD, wrapInfo(job), wrapped)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", job, ErrSecretsKey)
	}
	aead, err := dataAEAD(dk)
	if err != nil {
		return nil, err
	}
	n := aead.NonceSize()
	if len(data) < n+aead.Overhead() {
		return nil, fmt.Errorf("job %s: sealed secrets of %d bytes: %w", job, len(data), ErrSecretsKey)
	}
	plain, err := aead.Open(nil, data[:n], data[n:], []byte(job))
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", job, ErrSecretsKey)
	}
	return plain, nil
}
