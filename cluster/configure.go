package cluster

// The replication factor: recorded in the meta group by the bootstrap
// (firstPolicy) and changed by an operator's signed configure request.

import (
	"context"
	"time"

	"tally/cluster/node"
	"tally/cluster/replica"
)

// DefaultReplicas is the replication factor a new cluster gets.
const DefaultReplicas = 3

// ConfigurePath sets the replication factor (signed).
const ConfigurePath = "/v1/cluster/configure"

// ConfigureRequest sets the replication factor: each data group's voters.
type ConfigureRequest struct {
	Replicas int `json:"replicas"`
	Signed
}

func (r *ConfigureRequest) envelope() (string, *Signed, []any) {
	return "configure", &r.Signed, []any{r.Replicas}
}

// Configured answers a configure: the factor now and before (0: every
// member a voter, a cluster made before the factor existed).
type Configured struct {
	Replicas int `json:"replicas"`
	Was      int `json:"was"`
}

// OpConfigure records the replication factor in the meta group; the
// placement driver then brings every group to it. An even, zero or
// negative factor is refused (400) with nothing recorded, its nonce
// included.
func (c *Node) OpConfigure(ctx context.Context, decode Decode) (any, error) {
	var req ConfigureRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return nil, err
	}
	if err := replica.CheckReplicas(req.Replicas); err != nil {
		return nil, refusal(err)
	}
	out, err := c.signedMeta(ctx, &req.Signed, replica.MetaCommand{Op: replica.OpConfigure, Replicas: req.Replicas})
	if err != nil {
		return nil, refusal(err)
	}
	v, _ := out.Value.(replica.Configured)
	return Configured{Replicas: v.Replicas, Was: v.Was}, nil
}

// signedMeta records a signed request's nonce in the meta group, then
// proposes its command there, within 10 s: a refusal is the error.
func (c *Node) signedMeta(ctx context.Context, s *Signed, cmd replica.MetaCommand) (replica.Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.spendNonce(ctx, s); err != nil {
		return replica.Outcome{}, err
	}
	return c.proposeMeta(ctx, cmd)
}

// firstPolicy records the bootstrap's replication factor in the meta
// group, once: on the bootstrapping node, until the meta group has a
// factor (one recorded by an operator since is never overwritten). A
// cluster bootstrapped by a release without the factor has none in its
// identity and keeps every member a voter until configured.
func (c *Node) firstPolicy(ctx context.Context) {
	if c.id.Replicas == 0 {
		return
	}
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.readIndex(rctx, node.MetaGroup)
		if err == nil && c.sm.Policy().Replicas != 0 {
			cancel()
			return
		}
		if err == nil {
			_, err = c.proposeMeta(rctx, replica.MetaCommand{Op: replica.OpConfigure, Replicas: c.id.Replicas})
		}
		cancel()
		if err == nil {
			return
		}
		c.log.Debug("replication factor: retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
