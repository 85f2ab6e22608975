package mcp

// tally_prime: the start-of-session context of a seat, the bytes `tally
// prime --as SEAT [--session S]` prints, for a model to read at its start
// (a prompt is started by a person; a tool, by the model). The prompt
// resume_seat is the same text.

import (
	"context"
	"fmt"
	"time"

	"tally/prime"
	"tally/refuse"
	"tally/service"
	"tally/sessionname"
)

// primeQuery is tally_prime's document.
type primeQuery struct {
	Seat      string `json:"seat,omitempty" jsonschema:"default: you"`
	MaxTokens int    `json:"max_tokens,omitempty" jsonschema:"bound, 4 bytes a token (default 1500)"`
}

// primeText is a context as a tool answers it: text alone.
type primeText struct{ text string }

func (p primeText) toolText() string { return p.text }

func (s *Server) primeTool() tool {
	return read("tally_prime", "Prime this seat",
		"What a seat must know now and how to act (tally prime). Read it first.",
		plain(func(q *primeQuery) primeQuery { return *q }),
		func(svc service.Service, ctx context.Context, c service.Call, q primeQuery) (primeText, error) {
			text, err := s.prime(ctx, svc, c, q.Seat, q.MaxTokens)
			return primeText{text}, err
		})
}

// prime is the context of seat (default: the caller) in c's session at
// c.Now (zero: the server's clock), bounded to maxTokens (zero: the
// default). Its commands name the seat with --as, since the server cannot
// know what the reader's shell sets, and the session when not the default.
func (s *Server) prime(ctx context.Context, svc service.Service, c service.Call, seat string, maxTokens int) (string, error) {
	if seat == "" {
		seat = c.Actor
	}
	if seat == "" {
		return "", refuse.Invalidf("seat", "required: this server acts as no identity")
	}
	switch {
	case maxTokens == 0:
		maxTokens = prime.TokensDefault
	case maxTokens < 0:
		return "", refuse.Invalidf("max_tokens", fmt.Sprintf("must be a positive number of tokens (got %d)", maxTokens))
	}
	if c.Now.IsZero() {
		c.Now = s.cfg.Now().UTC().Truncate(time.Second) // people read it: whole seconds
	}
	cmds := prime.Commands{As: seat}
	if c.Tenant != sessionname.DefaultTenant || c.Session != sessionname.DefaultSession {
		cmds.Session = c.Tenant + "/" + c.Session
	}
	return prime.Text(ctx, svc, c, seat, cmds, maxTokens)
}
