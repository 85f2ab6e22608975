package cluster

// Placing a session (tally cluster place): the operator's request, signed
// with the join secret, records in the directory the data group a session
// lives in, in two steps. First the group the session routes to now
// fences it (replica.MethodFence): refused there if that group holds
// records of it, else every replica of that group refuses the session's
// commands from then on (replica.Moved). Then the meta group records the
// placement (replica.OpPlacementSet), and routing sends the session to
// its group (route.go). A node that has not applied the placement yet
// can therefore never commit a write where the session no longer lives.
// Each step answers a repeat as the first, so running the request again
// after a failure between them completes it.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/service"
)

// The placement routes: place a session, and list the directory's
// placements. Both are signed with the join secret; the list is signed at
// an instant, as a backup request is, since it names tenants' sessions.
const (
	PlacePath      = "/v1/cluster/place"
	PlacementsPath = "/v1/cluster/placements"
)

// PlaceRequest asks for a session's placement in a data group.
type PlaceRequest struct {
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	Group   uint64 `json:"group"`
	Signed
}

func (r *PlaceRequest) envelope() (string, *Signed, []any) {
	return "place", &r.Signed, []any{r.Tenant, r.Session, r.Group}
}

// SignPlacements makes a placements request for the node to, signed with
// the join secret at at: the directory's first page.
func SignPlacements(secret string, to Target, at time.Time) SignedAt {
	return signAt(secret, "placements", to, at)
}

// PlacementsPageMax bounds the placements one answer carries: a directory
// of more is read in pages (PlacementsRequest.After, Placements.Next), so
// no answer carries the whole of it.
const PlacementsPageMax = 1000

// PlacementsRequest asks for a page of the directory's placements: those
// after the session named After ("tenant/session"; none: from the first).
// Without After it is signed as SignPlacements signs it, so a node of the
// previous release answers it (whole, in one page).
type PlacementsRequest struct {
	Signed
	After string `json:"after,omitempty"`
}

func (r *PlacementsRequest) envelope() (string, *Signed, []any) {
	if r.After == "" {
		return "placements", &r.Signed, nil
	}
	return "placements", &r.Signed, []any{r.After}
}

// SignPlacementsAfter makes a request for the page of placements after
// the session named after, signed with the join secret at at.
func SignPlacementsAfter(secret string, to Target, at time.Time, after string) PlacementsRequest {
	r := PlacementsRequest{After: after}
	sign(secret, to, at, &r)
	return r
}

// Placed is a placement's answer.
type Placed struct {
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	Group   uint64 `json:"group"`
	// HashGroup is the group the hash of the session's name gives it;
	// Recorded says the directory records the placement (a session placed
	// in its hash's group needs no record).
	HashGroup uint64 `json:"hash_group"`
	Recorded  bool   `json:"recorded"`
}

// Placements is the directory's placements as a node answers them: one
// page, in name order; Next, when set, names the last, after which the
// next page begins.
type Placements struct {
	SchemaVersion int                 `json:"schema_version"`
	Placements    []replica.Placement `json:"placements"`
	Next          string              `json:"next,omitempty"`
}

// Place places a session in a data group: fenced in the group it routes
// to now (as of a quorum-confirmed read of the directory), then recorded
// in the directory.
func (c *Node) Place(ctx context.Context, p replica.Placement) (Placed, error) {
	if err := c.readIndex(ctx, node.MetaGroup); err != nil {
		return Placed{}, err
	}
	from := c.sm.GroupOf(p.Tenant, p.Session)
	if err := c.fence(ctx, from, p); err != nil {
		return Placed{}, err
	}
	if _, err := proposeMeta[replica.Placement](ctx, c, replica.MetaCommand{Op: replica.OpPlacementSet, Placement: &p, TS: time.Now().UnixNano()}); err != nil {
		if from == p.Group {
			return Placed{}, err
		}
		return Placed{}, fmt.Errorf("session %s is fenced in group %d; recording its placement in group %d: %w (run the placement again to complete it)", p.Name(), from, p.Group, err)
	}
	hash := replica.GroupOf(c.cfg.Groups, p.Tenant, p.Session)
	c.log.Info("session placed", "session", p.Name(), "group", p.Group, "from", from)
	return Placed{Tenant: p.Tenant, Session: p.Session, Group: p.Group, HashGroup: hash, Recorded: p.Group != hash}, nil
}

// fence has group fence the session for its placement.
func (c *Node) fence(ctx context.Context, group uint64, p replica.Placement) error {
	cmd, err := NewCommand(replica.MethodFence, service.Call{Tenant: p.Tenant, Session: p.Session}, replica.FenceDoc{Group: p.Group}, time.Now(), 0)
	if err != nil {
		return err
	}
	data, err := cmd.Encode()
	if err != nil {
		return err
	}
	out, err := c.propose(ctx, group, data)
	if err != nil {
		return err
	}
	return out.Err
}

// ListPlacements is the directory's placements as of a linearizable read
// of the meta group: the whole directory (OpPlacements pages it).
func (c *Node) ListPlacements(ctx context.Context) ([]replica.Placement, error) {
	if err := c.readIndex(ctx, node.MetaGroup); err != nil {
		return nil, err
	}
	return c.sm.Placements(), nil
}

// ListPlacementsFrom is a page of the directory's placements, at most
// limit after the session named after, as of a linearizable read of the
// meta group; it reads only the directory's ranges the page spans.
func (c *Node) ListPlacementsFrom(ctx context.Context, after string, limit int) ([]replica.Placement, error) {
	if err := c.readIndex(ctx, node.MetaGroup); err != nil {
		return nil, err
	}
	return c.sm.PlacementsFrom(after, limit), nil
}

// proposeMeta commits a meta command and returns its value, of type R.
func proposeMeta[R any](ctx context.Context, c *Node, cmd replica.MetaCommand) (R, error) {
	var zero R
	data, err := json.Marshal(cmd)
	if err != nil {
		return zero, err
	}
	out, err := c.propose(ctx, node.MetaGroup, data)
	if err != nil {
		return zero, err
	}
	return valueOf[R](cmd.Op, out)
}

// OpPlace places a session.
func (c *Node) OpPlace(ctx context.Context, decode Decode) (any, error) {
	var req PlaceRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p := replica.Placement{Tenant: req.Tenant, Session: req.Session, Group: req.Group}
	if err := replica.CheckPlacement(p, c.sm.DataGroups()); err != nil {
		return nil, refusal(err)
	}
	var placed Placed
	err := c.spendNonce(ctx, &req.Signed)
	if err == nil {
		placed, err = c.Place(ctx, p)
	}
	if err != nil {
		return nil, refusal(err)
	}
	return placed, nil
}

// OpPlacements lists a page of the directory's placements: at most
// PlacementsPageMax, with the name the next page follows when there may be
// more.
func (c *Node) OpPlacements(ctx context.Context, decode Decode) (any, error) {
	var req PlacementsRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ps, err := c.ListPlacementsFrom(ctx, req.After, PlacementsPageMax)
	if err != nil {
		return nil, refusal(err)
	}
	out := Placements{SchemaVersion: 1, Placements: ps}
	if ps == nil {
		out.Placements = []replica.Placement{}
	}
	if len(ps) == PlacementsPageMax {
		out.Next = ps[len(ps)-1].Name()
	}
	return out, nil
}
