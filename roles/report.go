package roles

// DeathReport is the content of a death report znode
// (<root>/group/<group>/dead/<name>, a Baton addition): a member declared
// a runner dead that it cannot take over itself, and the instances that
// can take it over are woken by the report. Only the znode's name is acted
// on, after the taker has seen the heartbeat timed out itself; the fields
// say who reported it and why, for people reading the tree.
type DeathReport struct {
	ReportedBy   string `json:"reported_by"`
	Role         Role   `json:"role"`
	HeartbeatAge string `json:"heartbeat_age"`
	Time         string `json:"time"`
}
