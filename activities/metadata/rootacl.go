package metadata

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
)

// ErrAuthRequired is what a ZooKeeper server that enforces authentication
// (enforce.auth.enabled=true, as the local stack and the Compose ensemble
// run) answers a session that did not authenticate: every request fails
// with it.
var ErrAuthRequired = errors.New("the ZooKeeper server requires authentication (enforce.auth.enabled): " +
	"give Baton the digest credentials user:password with --zk-auth-file or $BATON_ZK_AUTH")

// errCodeAuthRequired is ZooKeeper's SESSIONCLOSEDREQUIRESASLAUTH (-124),
// which go-zookeeper does not name: it reports "unknown error: -124".
const errCodeAuthRequired = zk.ErrCode(-124)

func isAuthRequired(err error) bool {
	return err != nil && err.Error() == fmt.Sprintf("unknown error: %v", errCodeAuthRequired)
}

// OpenRootError is CheckRoot's refusal of a root znode whose ACL lets any
// client change it while Baton authenticates.
type OpenRootError struct {
	// Root is the root znode.
	Root string
	// Perms are the permissions world:anyone has on it, e.g. "cdrwa".
	Perms string
	// User is Baton's digest user.
	User string
}

func (e *OpenRootError) Error() string {
	return fmt.Sprintf("zookeeper root %s has an open ACL (world:anyone:%s): any client of the ensemble may "+
		"create, change or delete znodes there, so Baton's digest ACL (user %q) would not protect the group's Tasks; "+
		"refusing to use it. Fix it with ZooKeeper's CLI as a client allowed to: `setAcl -R %s digest:%s:<hash>:cdrwa` "+
		"(<hash>: base64 of the SHA-1 of user:password), or delete it (`deleteall %s`) so that Baton creates it with its ACL, "+
		"or give Baton a fresh --zk-root", e.Root, e.Perms, e.User, e.Root, e.User, e.Root)
}

// CheckRoot checks, before Baton uses it, the root znode of its metadata.
//
// With digest credentials, a root that exists with an ACL granting
// world:anyone more than read (a root made by a client without
// credentials, or by an older Baton) is refused with an *OpenRootError:
// Baton's znodes below it would carry its digest ACL, but anyone could
// still create znodes next to them, or under a parent made before. A
// root that does not exist yet is fine: Baton creates it with its ACL.
//
// Without credentials, it reports ErrAuthRequired when the server
// refuses unauthenticated sessions, so that the mistake shows at start
// rather than at the first write.
func (z *ZooKeeper) CheckRoot(_ context.Context, root string) error {
	if root == "" {
		root = DefaultRoot
	}
	if z.user == "" {
		if _, _, err := z.conn.Exists(root); err != nil {
			return z.mapErr("exists", root, err)
		}
		return nil
	}
	acl, _, err := z.conn.GetACL(root)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return z.mapErr("get ACL of", root, err)
	}
	for _, a := range acl {
		if a.Scheme == "world" && a.ID == "anyone" && a.Perms&^zk.PermRead != 0 {
			return &OpenRootError{Root: root, Perms: permString(a.Perms), User: z.user}
		}
	}
	return nil
}

// permString writes ZooKeeper permissions as its CLI does: "cdrwa".
func permString(p int32) string {
	var b strings.Builder
	for _, x := range []struct {
		bit int32
		c   byte
	}{{zk.PermCreate, 'c'}, {zk.PermDelete, 'd'}, {zk.PermRead, 'r'}, {zk.PermWrite, 'w'}, {zk.PermAdmin, 'a'}} {
		if p&x.bit != 0 {
			b.WriteByte(x.c)
		}
	}
	return b.String()
}
