package connect

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/batoncrawl/baton/activities/connect/security"
)

// Metadata of an encrypted payload.
const (
	EncodingEncrypted = "binary/encrypted"
	metaKeyID         = "encryption-key-id"
)

// ErrPayloadKey is the error of a payload key file that cannot be used.
var ErrPayloadKey = errors.New("payload key")

// PayloadCodec encrypts every Temporal payload (workflow and activity
// inputs and results, queries, memos' values, failures' messages with the
// failure converter) with AES-256-GCM under one key, as Temporal's
// encryption sample does: what Temporal stores and shows without the key is
// ciphertext. Payloads it did not encrypt pass through Decode unchanged
// (histories from before the key). Safe for concurrent use.
type PayloadCodec struct {
	aead  cipher.AEAD
	keyID string
}

var _ converter.PayloadCodec = (*PayloadCodec)(nil)

// NewPayloadCodec returns a codec for a 32-byte key; its ID (recorded in
// each payload) is the first 8 bytes of the key's SHA-256, in hex.
func NewPayloadCodec(key []byte) (*PayloadCodec, error) {
	aead, id, err := security.AES256GCM(key, "", 8)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPayloadKey, err)
	}
	return &PayloadCodec{aead: aead, keyID: id}, nil
}

// KeyID names the codec's key (not secret).
func (c *PayloadCodec) KeyID() string { return c.keyID }

// Encode implements converter.PayloadCodec.
func (c *PayloadCodec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("encrypt payload: %w", err)
		}
		nonce := make([]byte, c.aead.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return nil, err
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{converter.MetadataEncoding: []byte(EncodingEncrypted), metaKeyID: []byte(c.keyID)},
			Data:     c.aead.Seal(nonce, nonce, plain, []byte(c.keyID)),
		}
	}
	return out, nil
}

// Decode implements converter.PayloadCodec.
func (c *PayloadCodec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != EncodingEncrypted {
			out[i] = p
			continue
		}
		if id := string(p.GetMetadata()[metaKeyID]); id != c.keyID {
			return nil, fmt.Errorf("%w: payload encrypted with key %s, this key is %s", ErrPayloadKey, id, c.keyID)
		}
		n := c.aead.NonceSize()
		if len(p.Data) < n {
			return nil, fmt.Errorf("%w: encrypted payload too short", ErrPayloadKey)
		}
		plain, err := c.aead.Open(nil, p.Data[:n], p.Data[n:], []byte(c.keyID))
		if err != nil {
			return nil, fmt.Errorf("%w: payload does not decrypt with key %s (altered, or another key)", ErrPayloadKey, c.keyID)
		}
		var dp commonpb.Payload
		if err := proto.Unmarshal(plain, &dp); err != nil {
			return nil, fmt.Errorf("decrypt payload: %w", err)
		}
		out[i] = &dp
	}
	return out, nil
}

// LoadPayloadKey reads a payload key file: 32 bytes as 64 hex digits or
// standard base64 (a trailing newline allowed). The file must not be
// readable by others than its owner (0600 or stricter): the key opens
// every payload of the namespace's Baton workflows.
func LoadPayloadKey(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPayloadKey, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s is readable by others (mode %v): chmod 600 it", ErrPayloadKey, path, st.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPayloadKey, err)
	}
	s := strings.TrimSpace(string(raw))
	if k, err := hex.DecodeString(s); err == nil && len(k) == 32 {
		return k, nil
	}
	if k, err := base64.StdEncoding.DecodeString(s); err == nil && len(k) == 32 {
		return k, nil
	}
	return nil, fmt.Errorf("%w: %s: want 32 bytes as 64 hex digits or base64 (make one: openssl rand -hex 32 > FILE)", ErrPayloadKey, path)
}

// applyCodec makes opts encrypt every payload and failure message with
// codec.
func applyCodec(opts *clientOptions, codec *PayloadCodec) {
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), codec)
	opts.DataConverter = dc
	opts.FailureConverter = temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter: dc, EncodeCommonAttributes: true})
}
