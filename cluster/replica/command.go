package replica

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"tally/auth"
	"tally/jsonline"
)

// Command is one committed entry of a data group: a Service method called
// by an actor in a session, with everything a replica could otherwise only
// guess fixed by the proposer: the instant the records are stamped with and
// the seed the ids a command mints are drawn from. Stored in the raft log:
// do not rename the members.
type Command struct {
	Method    string          `json:"m"`
	Tenant    string          `json:"t"`
	Session   string          `json:"s"`
	Actor     string          `json:"a,omitempty"`
	Person    bool            `json:"p,omitempty"`
	RequestID string          `json:"r,omitempty"`
	TS        int64           `json:"ts"` // Unix nanoseconds, the proposer's clock
	Seed      uint64          `json:"seed,omitempty"`
	Doc       json.RawMessage `json:"d,omitempty"` // the method's api document
	// Payload is raw bytes the command carries beside its document (a
	// chunk of an upload): framed after the JSON rather than inside it,
	// where base64 would make them a third larger.
	Payload []byte `json:"-"`
}

// payloadFrame opens an entry whose command carries a payload: the frame
// byte, the JSON's length (uvarint), the JSON, then the payload. A JSON
// text never starts with it, so entries without a payload stay plain JSON.
const payloadFrame = 0x01

// Encode is the entry's bytes.
func (c Command) Encode() ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode command %s: %w", c.Method, err)
	}
	if len(c.Payload) == 0 {
		return b, nil
	}
	out := make([]byte, 0, 1+binary.MaxVarintLen64+len(b)+len(c.Payload))
	out = binary.AppendUvarint(append(out, payloadFrame), uint64(len(b)))
	return append(append(out, b...), c.Payload...), nil
}

// DecodeCommand reads an entry written by Encode. The payload, if any,
// shares b's memory.
func DecodeCommand(b []byte) (Command, error) {
	var payload []byte
	if len(b) > 0 && b[0] == payloadFrame {
		n, w := binary.Uvarint(b[1:])
		if w <= 0 || n > uint64(len(b)-1-w) {
			return Command{}, errors.New("decode command: a framed entry's length is out of range")
		}
		body := b[1+w:]
		b, payload = body[:n], body[n:]
	}
	c, ok := decodePlain(b)
	if !ok {
		c = Command{}
		if err := json.Unmarshal(b, &c); err != nil {
			return Command{}, fmt.Errorf("decode command: %w", err)
		}
	}
	c.Payload = payload
	return c, nil
}

// errNotPlain stops decodePlain at the first member it leaves to
// encoding/json.
var errNotPlain = errors.New("not a plain command")

// decodePlain decodes a command as Encode writes it, without reflection:
// its members by their exact names, strings without escapes, integers, a
// bool and the document as an object (kept as the entry's bytes, which
// every replica's apply holds until it is done). Anything else (an escape,
// another member, a value of another type) reports false, and
// encoding/json decodes the entry as it always did, so both read every
// entry alike.
func decodePlain(b []byte) (Command, bool) {
	var c Command
	err := jsonline.Object(b, func(key, v []byte) error {
		ok := true
		switch string(key) {
		case "m":
			c.Method, ok = plainString(v)
		case "t":
			c.Tenant, ok = plainString(v)
		case "s":
			c.Session, ok = plainString(v)
		case "a":
			c.Actor, ok = plainString(v)
		case "r":
			c.RequestID, ok = plainString(v)
		case "p":
			c.Person, ok = string(v) == "true", string(v) == "true" || string(v) == "false"
		case "ts":
			n, err := strconv.ParseInt(string(v), 10, 64)
			c.TS, ok = n, err == nil
		case "seed":
			n, err := strconv.ParseUint(string(v), 10, 64)
			c.Seed, ok = n, err == nil
		case "d":
			c.Doc, ok = json.RawMessage(v), jsonline.IsObject(v)
		default:
			ok = false
		}
		if !ok {
			return errNotPlain
		}
		return nil
	})
	return c, err == nil
}

// plainString is a JSON string's text if it holds no escape (encoding/json
// then reads the bytes between the quotes as they are; the scan checked
// they are valid UTF-8).
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
		return "", false
	}
	return string(v[1 : len(v)-1]), true
}

// MetaCommand is one committed entry of the meta group. Stored in the raft
// log: do not rename the members.
type MetaCommand struct {
	Op     string  `json:"op"` // one of the Op constants
	Member *Member `json:"member,omitempty"`
	ID     uint64  `json:"id,omitempty"`
	// Token is a token.create's record (the hash of the secret the
	// proposer minted, never the secret); TokenID a token.revoke's token.
	Token   *auth.Record `json:"token,omitempty"`
	TokenID string       `json:"token_id,omitempty"`
	// Placement is a placement.set's session and group.
	Placement *Placement `json:"placement,omitempty"`
	// Nonce is a nonce.use's: an operator request's one-time nonce.
	Nonce *NonceEntry `json:"nonce,omitempty"`
	// Replicas is a cluster.configure's replication factor.
	Replicas int `json:"replicas,omitempty"`
	// Decision is a placement.decide's or placement.decided's; Group and
	// GroupConf a placement.group's.
	Decision  *Decision  `json:"decision,omitempty"`
	Group     uint64     `json:"group,omitempty"`
	GroupConf *GroupConf `json:"group_conf,omitempty"`
	// Liveness is a node.liveness's fact.
	Liveness *LivenessFact `json:"liveness,omitempty"`
	// Move is a move.begin's or move.step's (move.go).
	Move *MoveStep `json:"move,omitempty"`
	TS   int64     `json:"ts,omitempty"` // Unix nanoseconds, the proposer's clock

	// Constraint is a placement.constrain's (constraint.go).
	Constraint *ConstraintEntry `json:"constraint,omitempty"`

	// Custody is a cluster.custody's policy (custody.go).
	Custody string `json:"custody,omitempty"`
	// GroupsAdd is a groups.add's (directory_groups.go).
	GroupsAdd *GroupsAdd `json:"groups_add,omitempty"`
}

// Meta operations.
const (
	OpMemberAdd    = "member.add"
	OpMemberRemove = "member.remove"
	OpTokenCreate  = "token.create"
	OpTokenRevoke  = "token.revoke"
	// OpPlacementSet records a session's group in the directory; the
	// proposer has had the session fenced in the group it routed to.
	OpPlacementSet = "placement.set"
	// OpNonceUse records a signed operator request's nonce, refusing one
	// recorded already (a replay), at whichever node it was taken.
	OpNonceUse = "nonce.use"
)

// Member is one node of the cluster as the meta group records it.
type Member struct {
	ID       uint64 `json:"id"`
	RaftAddr string `json:"raft_addr"`
	Addr     string `json:"addr"`
	Zone     string `json:"zone,omitempty"`
	Region   string `json:"region,omitempty"`
	// GossipAddr is where the node's failure detector listens (UDP and
	// TCP); empty, the default derived from RaftAddr (cluster.GossipAddr).
	GossipAddr string `json:"gossip_addr,omitempty"`
}
