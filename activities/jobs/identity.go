package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"

	"github.com/batoncrawl/baton/activities/metadata"
)

// ErrOtherStore: the group's data lives in another store.
var ErrOtherStore = errors.New("the group uses another job store")

// StorePath is the znode where a group records its job store's identity:
// <root>/group/<group>/store.
func StorePath(root, group string) string {
	if root == "" {
		root = metadata.DefaultRoot
	}
	return path.Join(root, "group", group, "store")
}

// BindGroup records id as the group's job store when the group has none
// yet, and refuses with ErrOtherStore, naming both, when it has another:
// a worker or CLI on the wrong store must not start (its Runners would
// never find the job's batches).
func BindGroup(ctx context.Context, meta metadata.Store, root, group string, id Identity) error {
	data, err := json.Marshal(id)
	if err != nil {
		return err
	}
	p := StorePath(root, group)
	return bindZnode(ctx, meta, p, "the job store of group "+group, data, func(cur []byte) error { return CheckGroup(group, p, cur, id) })
}

// bindZnode creates the znode p with data when it does not exist, else
// hands its data to check (another process may create it meanwhile).
func bindZnode(ctx context.Context, meta metadata.Store, p, what string, data []byte, check func([]byte) error) error {
	for range 3 {
		cur, _, err := meta.Get(ctx, p)
		if errors.Is(err, metadata.ErrNotFound) {
			if _, err := meta.Create(ctx, p, data, metadata.Persistent); err == nil {
				return nil
			} else if !errors.Is(err, metadata.ErrExists) {
				return fmt.Errorf("record %s in %s: %w", what, p, err)
			}
			continue // created meanwhile by another process: compare
		}
		if err != nil {
			return fmt.Errorf("read %s from %s: %w", what, p, err)
		}
		return check(cur)
	}
	return fmt.Errorf("record %s in %s: changed while recording it", what, p)
}

// CheckGroup compares a group's recorded store (the znode's data at p)
// with id.
func CheckGroup(group, p string, recorded []byte, id Identity) error {
	var want Identity
	if err := json.Unmarshal(recorded, &want); err != nil || want.ID == "" {
		return fmt.Errorf("znode %s (the job store of group %s) is corrupted: %q: fix or delete it", p, group, recorded)
	}
	if want.ID != id.ID {
		return fmt.Errorf("%w: group %s keeps its crawl data in %s, but this one is %s: "+
			"point --store/--data-dir at the group's store, or use another --group: %s", ErrOtherStore, group, want, id, p)
	}
	return nil
}
