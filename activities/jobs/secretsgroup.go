package jobs

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/batoncrawl/baton/activities/metadata"
)

// ErrOtherSecretsKey: the group seals its jobs' secrets with another key.
var ErrOtherSecretsKey = errors.New("the group uses another secrets key")

// SecretsKeyPath is the znode where a group records the ID of its secrets
// key (Sealer.KeyID, a hash: never the key): <root>/group/<group>/secrets-key.
func SecretsKeyPath(root, group string) string {
	if root == "" {
		root = metadata.DefaultRoot
	}
	return path.Join(root, "group", group, "secrets-key")
}

// BindSecretsKey records keyID as the group's secrets key when the group
// has none yet, and refuses with ErrOtherSecretsKey, naming both, when it
// has another: a worker with another key could not open the group's jobs'
// secrets (and a CLI's would be unreadable to the workers).
func BindSecretsKey(ctx context.Context, meta metadata.Store, root, group, keyID string) error {
	p := SecretsKeyPath(root, group)
	return bindZnode(ctx, meta, p, "the secrets key of group "+group, []byte(keyID),
		func(cur []byte) error { return CheckSecretsKey(group, p, cur, keyID) })
}

// CheckSecretsKey compares a group's recorded key ID (the znode's data at
// p) with keyID.
func CheckSecretsKey(group, p string, recorded []byte, keyID string) error {
	if string(recorded) != keyID {
		return fmt.Errorf("%w: group %s seals its jobs' secrets with key %q, this --secrets-key-file has key %s: "+
			"copy the group's key file here (or use another --group): %s", ErrOtherSecretsKey, group, recorded, keyID, p)
	}
	return nil
}

// SecretsPublicKeyPath is the znode where a group publishes its public
// secrets key, "KEYID HEX": what a submitter seals its jobs' secrets with,
// without holding the workers' private key file.
func SecretsPublicKeyPath(root, group string) string {
	return SecretsKeyPath(root, group) + ".pub"
}

// PublishSecretsKey records s's public key as the group's, replacing
// another one (after a rotation, the workers' key is the group's). Call
// it once BindSecretsKey accepted s.
func PublishSecretsKey(ctx context.Context, meta metadata.Store, root, group string, s *Sealer) error {
	p := SecretsPublicKeyPath(root, group)
	data := []byte(s.KeyID() + " " + hex.EncodeToString(s.PublicKey()))
	return bindZnode(ctx, meta, p, "the public secrets key of group "+group, data, func(cur []byte) error {
		if string(cur) == string(data) {
			return nil
		}
		_, v, err := meta.Get(ctx, p)
		if err == nil {
			_, err = meta.Set(ctx, p, data, v)
		}
		if err != nil {
			return fmt.Errorf("record the public secrets key of group %s in %s: %w", group, p, err)
		}
		return nil
	})
}

// ParsePublicSecretsKey reads the data of SecretsPublicKeyPath into a
// Sealer that only seals.
func ParsePublicSecretsKey(p string, data []byte) (*Sealer, error) {
	id, h, ok := strings.Cut(strings.TrimSpace(string(data)), " ")
	pub, err := hex.DecodeString(h)
	if !ok || err != nil {
		return nil, fmt.Errorf("znode %s: want \"KEYID HEX\", got %d bytes", p, len(data))
	}
	return NewPublicSealer(id, pub)
}
