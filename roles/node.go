package roles

// NodeState is one instance's membership (znode <root>/node/<name>/state).
// Group and Role are the reference's fields; TakenOverBy is Baton's: the
// name of the instance that claimed this dead node's task, so that exactly
// one survivor hands it over.
type NodeState struct {
	Group       string `json:"group"`
	Role        Role   `json:"role"`
	TakenOverBy string `json:"taken_over_by,omitempty"`
}

// DecodeNodeState parses and validates a NodeState document.
func DecodeNodeState(data []byte) (NodeState, error) {
	var n NodeState
	if err := decode("NodeState", data, &n); err != nil {
		return n, err
	}
	return n, n.Validate()
}

// Validate names the first bad field.
func (n NodeState) Validate() error {
	if n.Group == "" {
		return fieldErr("NodeState", "group", "is empty")
	}
	if !n.Role.Valid() {
		return fieldErr("NodeState", "role", "unknown role %q (want initial, runner, backup-runner, dead-runner or dead-backup-runner)", string(n.Role))
	}
	return nil
}
