package gating

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ItemID is an item's id: "issue-<n>", the number of its mirrored issue.
type ItemID string

// IDFor returns the item id of issue number n.
func IDFor(n int) ItemID { return ItemID("issue-" + strconv.Itoa(n)) }

// ParseID reads "issue-<n>" (n ≥ 1, no sign, no leading zeros) and returns n.
func ParseID(s string) (int, error) {
	if n := idNumber(s); n > 0 {
		return n, nil
	}
	return 0, fmt.Errorf("%q is not an item id (issue-<number>)", s)
}

// idNumber is ParseID's number, or 0 when s is not an item id; it does not
// allocate (the ready set reads every id and every blockedBy target).
func idNumber(s string) int {
	const prefix = "issue-"
	if len(s) <= len(prefix) || len(s) > len(prefix)+10 || s[:len(prefix)] != prefix || s[len(prefix)] == '0' {
		return 0
	}
	var n int64 // at most ten digits: no overflow
	for k := len(prefix); k < len(s); k++ {
		c := s[k]
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int64(c-'0')
	}
	if n > math.MaxInt { // strconv.Atoi's range error where int is 32 bits
		return 0
	}
	return int(n)
}

// Number returns the issue number of a well-formed id, or 0.
func (id ItemID) Number() int { return idNumber(string(id)) }

// Rel is a typed link relation.
type Rel string

// The relations an item may carry (PROTOCOL.md "Items").
const (
	BlockedBy  Rel = "blockedBy"
	AnchoredTo Rel = "anchoredTo"
	PartOf     Rel = "partOf"
	Integrates Rel = "integrates"
	Informs    Rel = "informs"
	Related    Rel = "related"
	Claims     Rel = "claims"
)

// Rels lists every relation, in a stable order.
var Rels = []Rel{BlockedBy, AnchoredTo, PartOf, Integrates, Informs, Related, Claims}

// ValidRel reports whether r is a relation.
func ValidRel(r Rel) bool {
	for _, x := range Rels {
		if x == r {
			return true
		}
	}
	return false
}

// Link is one typed edge from an item. Target is an item id, except for
// anchoredTo, whose target is a repository-relative file path.
type Link struct {
	Rel    Rel    `json:"rel"`
	Target string `json:"target"`
}

// Item is a snapshot of a backlog item as the rules see it.
type Item struct {
	ID         ItemID
	Title      string
	Body       string
	Author     string
	Provenance string
	CreatedAt  time.Time
	Tags       []string
	Links      []Link
}

// Tag returns the value of the first tag with prefix p ("priority" for
// "priority:P1"), and whether there was one.
func (it *Item) Tag(p string) (string, bool) {
	for _, t := range it.Tags {
		if v, ok := strings.CutPrefix(t, p+":"); ok {
			return v, true
		}
	}
	return "", false
}

// HasTag reports whether the item carries exactly tag t.
func (it *Item) HasTag(t string) bool {
	for _, x := range it.Tags {
		if x == t {
			return true
		}
	}
	return false
}

// Targets returns the targets of the item's links of relation r.
func (it *Item) Targets(r Rel) []string {
	var out []string
	for _, l := range it.Links {
		if l.Rel == r {
			out = append(out, l.Target)
		}
	}
	return out
}

// Role is who is acting on the ledger.
type Role string

// Roles (CONTRACT.md §4). Warden is the service itself (parking, repairs).
const (
	RoleWorker Role = "worker"
	RolePM     Role = "pm"
	RoleHuman  Role = "human"
	RoleWarden Role = "warden"
)
