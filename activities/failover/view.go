package failover

import (
	"context"
	"errors"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// groupView is what one watching instance reads of its group, each part
// again only after it changed: its own NodeState, its own entry in the
// membership directory (role, standby, surplus), the directory's listing
// (who is in the group: its ring), and GroupState only where the decision
// needs the whole document (the standby, which promotes itself on a
// scale-up). So a change to the group wakes only the instances it
// concerns: a role change or a standby move its member, a join or a
// departure those whose ring it may shift. Used by one goroutine.
type groupView struct {
	a *Activities
	c *metadata.Cluster
	m cluster.Member

	nodeZ, selfZ, groupZ cluster.WatchedZnode
	listZ                cluster.WatchedChildren
	allRunner            *bool // the group's mode, read once
}

func (a *Activities) newView(c *metadata.Cluster, m cluster.Member) *groupView {
	return &groupView{a: a, c: c, m: m}
}

// node returns the instance's NodeState.
func (v *groupView) node(ctx context.Context) (roles.NodeState, error) {
	nd, err := v.nodeZ.Get(ctx, v.a.Deps.Store, v.c.NodePath(v.m.Name))
	return cluster.DecodeWith(nd, err, v.c.NodePath(v.m.Name), roles.DecodeNodeState)
}

// group returns GroupState, read again only after it changed.
func (v *groupView) group(ctx context.Context) (roles.GroupState, error) {
	gd, err := v.groupZ.Get(ctx, v.a.Deps.Store, v.c.GroupPath())
	return cluster.DecodeWith(gd, err, v.c.GroupPath(), roles.DecodeGroupState)
}

// allRunners reports the group's mode (recorded at formation, so read once).
func (v *groupView) allRunners(ctx context.Context) (bool, error) {
	if v.allRunner == nil {
		g, _, err := v.c.GetGroup(ctx)
		if err != nil {
			return false, err
		}
		all := g.AllAreRunners()
		v.allRunner = &all
	}
	return *v.allRunner, nil
}

// self returns the instance's entry in the membership directory; ok is
// false when it is not an elected member. A group formed before the
// directory existed (no entry yet) is read from GroupState.
func (v *groupView) self(ctx context.Context) (me roles.MemberState, ok bool, err error) {
	p := v.c.MemberPath(v.m.Name)
	data, err := v.selfZ.Get(ctx, v.a.Deps.Store, p)
	if errors.Is(err, metadata.ErrNotFound) {
		g, gerr := v.group(ctx)
		if gerr != nil {
			return me, false, gerr
		}
		_, states := g.Members()
		me, ok = states[v.m.Name]
		return me, ok, nil
	}
	me, err = cluster.DecodeWith(data, err, p, roles.DecodeMemberState)
	return me, err == nil, err
}

// members returns the group's elected members (its runners and backups),
// from the membership directory, or from GroupState for a group formed
// before the directory existed.
func (v *groupView) members(ctx context.Context) ([]string, error) {
	names, err := v.listZ.Get(ctx, v.a.Deps.Store, v.c.MembersPath())
	if errors.Is(err, metadata.ErrNotFound) || (err == nil && len(names) == 0) {
		g, gerr := v.group(ctx)
		if gerr != nil {
			return nil, gerr
		}
		names, _ = g.Members()
		return names, nil
	}
	return names, err
}

// roleOf returns a peer's role from its membership entry (read now: this
// is asked only of a peer declared dead or reported dead), or "" when it
// is not an elected member any more.
func (v *groupView) roleOf(ctx context.Context, name string) roles.Role {
	me, _, err := v.c.GetMember(ctx, name)
	if err == nil {
		return me.Role
	}
	if cluster.IsCorrupt(err) || !errors.Is(err, metadata.ErrNotFound) {
		v.a.Deps.Corrupt(ctx, err)
	}
	// No entry: an older group without the directory, or not a member.
	g, _, gerr := v.c.GetGroup(ctx)
	if gerr != nil {
		return ""
	}
	_, states := g.Members()
	return states[name].Role
}

// position reads the watcher's node and its membership: its role, and
// whether it is the standby. gone: its node is missing (Position.Missing);
// a read that fails is the error to return, marked corrupt when it is.
func (v *groupView) position(ctx context.Context) (node roles.NodeState, pos cluster.Position, gone bool, err error) {
	node, err = v.node(ctx)
	if errors.Is(err, metadata.ErrNotFound) {
		return node, cluster.Position{Missing: true}, true, nil
	}
	if err != nil {
		return node, pos, false, v.a.Deps.Corrupt(ctx, err)
	}
	me, _, err := v.self(ctx)
	if err != nil {
		return node, pos, false, v.a.Deps.Corrupt(ctx, err)
	}
	pos = cluster.Position{Role: node.Role, Standby: node.Role == roles.RoleBackup && me.Role == roles.RoleBackup && me.Standby}
	return node, pos, false, nil
}
