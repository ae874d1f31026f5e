package roles

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// DefaultGroup is the reference's default group name.
const DefaultGroup = "sc-crawler-cluster"

// errBadName is returned for a crawler name without a numeric index.
var errBadName = errors.New("crawler name must be <base><sep><index> with sep '_' or '-' and a positive index")

// Name is a parsed crawler name such as "sc-crawler_1".
type Name struct {
	Base  string
	Sep   string
	Index int
}

// String returns the name as written in the metadata.
func (n Name) String() string { return n.Base + n.Sep + strconv.Itoa(n.Index) }

// ParseName splits a crawler name "<base><sep><index>" where sep is '_' or
// '-'. The last separator wins, so "sc-crawler_1" has base "sc-crawler".
func ParseName(s string) (Name, error) {
	i := strings.LastIndexAny(s, "_-")
	if i <= 0 || i == len(s)-1 {
		return Name{}, fmt.Errorf("parse crawler name %q: %w", s, errBadName)
	}
	idx, err := strconv.Atoi(s[i+1:])
	if err != nil || idx < 0 {
		return Name{}, fmt.Errorf("parse crawler name %q: %w", s, errBadName)
	}
	return Name{Base: s[:i], Sep: s[i : i+1], Index: idx}, nil
}

// IndexOf returns the index of a crawler name, or -1 if it has none.
func IndexOf(s string) int {
	n, err := ParseName(s)
	if err != nil {
		return -1
	}
	return n.Index
}
