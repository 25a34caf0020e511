package mirror

import (
	"fmt"

	"go.yaml.in/yaml/v4"
)

// MaxClaimsPerOwnerLimit is the largest max_claims_per_owner accepted; a
// larger cap is no cap at all (0 says so).
const MaxClaimsPerOwnerLimit = 1000

// claimCapValue reads max_claims_per_owner: a whole number from 0 (no cap,
// the default) to MaxClaimsPerOwnerLimit, the live claims one owner (its
// token: gating.OwnerPrincipal) may hold at once.
func claimCapValue(n *yaml.Node) (int, error) {
	var v int64
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&v) != nil {
		return 0, fmt.Errorf("must be a whole number from 0 (no cap) to %d", MaxClaimsPerOwnerLimit)
	}
	if v < 0 || v > MaxClaimsPerOwnerLimit {
		return 0, fmt.Errorf("must be from 0 (no cap) to %d", MaxClaimsPerOwnerLimit)
	}
	return int(v), nil
}
