package cluster

// The custody policy: how many of a group's voters must hold a receipt
// for an artifact's bytes before an evaluation of it begins. Recorded in
// the meta group by an operator's signed request (tally cluster configure
// --custody all|majority); "all" until one is.

import (
	"context"

	"tally/cluster/replica"
)

// CustodyPolicyPath sets the custody policy (signed).
const CustodyPolicyPath = "/v1/cluster/custody"

// CustodyRequest sets the custody policy: replica.CustodyAll or
// replica.CustodyMajority.
type CustodyRequest struct {
	Custody string `json:"custody"`
	Signed
}

func (r *CustodyRequest) envelope() (string, *Signed, []any) {
	return "custody", &r.Signed, []any{r.Custody}
}

// CustodySet answers a custody request: the policy now and before.
type CustodySet struct {
	Custody string `json:"custody"`
	Was     string `json:"was"`
}

// OpCustody records the custody policy in the meta group; CustodyPending
// counts receipts by it from then on. A policy that is not named is
// refused (400, naming the field) with nothing recorded, its nonce
// included.
func (c *Node) OpCustody(ctx context.Context, decode Decode) (any, error) {
	var req CustodyRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return nil, err
	}
	if err := replica.CheckCustodyPolicy(req.Custody); err != nil {
		return nil, refusal(err)
	}
	out, err := c.signedMeta(ctx, &req.Signed, replica.MetaCommand{Op: replica.OpCustody, Custody: req.Custody})
	if err != nil {
		return nil, refusal(err)
	}
	v, _ := out.Value.(replica.CustodySet)
	return CustodySet{Custody: v.Custody, Was: v.Was}, nil
}

// CustodyPolicy is the custody policy as this node has applied the meta
// group.
func (c *Node) CustodyPolicy() string { return c.sm.Policy().CustodyPolicy() }
