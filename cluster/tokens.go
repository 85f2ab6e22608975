package cluster

import (
	"context"
	"time"

	"tally/auth"
	"tally/cluster/node"
	"tally/cluster/replica"
)

// The cluster's tokens live in the meta group: a token is minted by the
// node that takes the request (only the hash of its secret is proposed),
// committed by the meta group's quorum, and applied by every node, which
// authenticates from its applied table. A revocation is a meta command
// too: every node refuses the token once it has applied it.

var _ auth.Keeper = (*Node)(nil)

// Authenticate checks a bearer token against the tokens this node has
// applied. A token this node does not know may be newer than what it has
// applied (minted through another node a moment ago): it catches up with
// the meta group's leader once (a ReadIndex, shared by the requests that
// wait for it) and looks again.
func (c *Node) Authenticate(secret string) (auth.Token, error) {
	tok, err := c.sm.Tokens().Authenticate(secret)
	if err == nil || !auth.Shaped(secret) {
		return tok, err
	}
	c.catchUpMeta()
	return c.sm.Tokens().Authenticate(secret)
}

// catchUpMeta waits until this node has applied what the meta group had
// committed when it was called, or a moment has passed; concurrent callers
// share one read.
func (c *Node) catchUpMeta() {
	_, _, _ = c.metaSync.Do("meta", func() (any, error) {
		ctx, cancel := context.WithTimeout(c.ctx, 2*time.Second)
		defer cancel()
		return nil, c.readIndex(ctx, node.MetaGroup)
	})
}

// CreateToken mints a token and commits its record in the meta group.
func (c *Node) CreateToken(ctx context.Context, tenant, participant, role string, now time.Time) (string, auth.Token, error) {
	secret, rec, err := auth.Mint(tenant, participant, role, now)
	if err != nil {
		return "", auth.Token{}, err
	}
	e, err := c.proposeToken(ctx, replica.MetaCommand{Op: replica.OpTokenCreate, Token: &rec, TS: now.UnixNano()})
	if err != nil {
		return "", auth.Token{}, err
	}
	return secret, tokenOf(e), nil
}

// RevokeToken commits a token's revocation in the meta group.
func (c *Node) RevokeToken(ctx context.Context, id string, now time.Time) (auth.Token, error) {
	e, err := c.proposeToken(ctx, replica.MetaCommand{Op: replica.OpTokenRevoke, TokenID: id, TS: now.UnixNano()})
	if err != nil {
		return auth.Token{}, err
	}
	return tokenOf(e), nil
}

// ListTokens lists the cluster's tokens as of a linearizable read of the
// meta group.
func (c *Node) ListTokens(ctx context.Context) ([]auth.Token, error) {
	if err := c.readIndex(ctx, node.MetaGroup); err != nil {
		return nil, err
	}
	return c.sm.Tokens().List(), nil
}

func (c *Node) proposeToken(ctx context.Context, cmd replica.MetaCommand) (replica.TokenEntry, error) {
	return proposeMeta[replica.TokenEntry](ctx, c, cmd)
}

func tokenOf(e replica.TokenEntry) auth.Token {
	return auth.Token{ID: e.ID, Tenant: e.Tenant, Participant: e.Participant, Role: e.Role, Created: e.Created, Revoked: e.Revoked}
}

// firstAdmin gives a cluster its first token, once: an admin of every
// tenant's tokens (auth.AllTenants), printed through Config.OnFirstToken
// before it is proposed, so a crash can never commit a token nobody saw.
// It runs on the bootstrapping node; a restart of that node with no token
// committed yet (a crash before the commit) mints and prints another.
func (c *Node) firstAdmin(ctx context.Context) {
	for ctx.Err() == nil {
		done, err := c.tryFirstAdmin(ctx)
		if done {
			return
		}
		c.log.Debug("first admin token: retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *Node) tryFirstAdmin(ctx context.Context) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.readIndex(rctx, node.MetaGroup); err != nil {
		return false, err
	}
	if c.sm.Tokens().Len() > 0 {
		// Said so that a restart's silence about a first token is
		// something one can wait for, and see.
		c.log.Info("first admin token: the cluster has tokens already; none minted")
		return true, nil
	}
	now := time.Now()
	secret, rec, err := auth.Mint(auth.AllTenants, FirstAdmin, auth.RoleAdmin, now)
	if err != nil {
		return false, err
	}
	if c.cfg.OnFirstToken != nil {
		c.cfg.OnFirstToken(secret, auth.Token{ID: rec.ID, Tenant: rec.Tenant, Participant: rec.Participant, Role: rec.Role, Created: rec.Created})
	}
	_, err = c.proposeToken(rctx, replica.MetaCommand{Op: replica.OpTokenCreate, Token: &rec, TS: now.UnixNano()})
	return err == nil, err
}

// FirstAdmin is the identity of a cluster's first token.
const FirstAdmin = "cluster-admin"
