package security

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// AES256GCM is the AEAD of a 32-byte key (AES-256-GCM), with the ID that
// names the key without revealing it: the first idBytes bytes of the
// SHA-256 of label and the key, in hex. The payload codec and the jobs'
// secrets seal with it, each with its own label.
func AES256GCM(key []byte, label string, idBytes int) (cipher.AEAD, string, error) {
	if len(key) != 32 {
		return nil, "", fmt.Errorf("%d bytes, want 32", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, "", err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(append([]byte(label), key...))
	return aead, hex.EncodeToString(sum[:idBytes]), nil
}
