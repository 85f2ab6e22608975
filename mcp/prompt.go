package mcp

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// promptResume is the prompt a host offers when a session of a seat
// starts: the text tally prime prints for the seat (and tally_prime
// answers), bounded, with the commands to act.
const promptResume = "resume_seat"

func (s *Server) addPrompts() {
	s.mcp.AddPrompt(&sdk.Prompt{Name: promptResume, Title: "Resume this seat",
		Description: "What the seat must know now, as tally prime prints it: what it owes (overdue first), what is owed to it late, the claims waiting on it, its lapsed expectations and the facts expected of it, with the commands to act.",
		Arguments: []*sdk.PromptArgument{
			{Name: "seat", Description: "the seat (default: the identity this server acts as)"},
			{Name: argSession, Description: "TENANT/SESSION, or SESSION in the caller's tenant (default: the server's)"},
			{Name: "max_tokens", Description: "bound on the text at 4 bytes a token (default 1500)"},
		}}, s.resume)
}

func (s *Server) resume(ctx context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
	who, err := s.cfg.Identify(ctx, req.Extra)
	if err != nil {
		return nil, err
	}
	maxTokens := 0
	if v := req.Params.Arguments["max_tokens"]; v != "" {
		if maxTokens, err = strconv.Atoi(v); err != nil || maxTokens < 1 {
			return nil, fmt.Errorf("max_tokens: must be a positive number of tokens (got %q)", v)
		}
	}
	ctx, c, release, err := s.readCall(ctx, who, req.Params.Arguments[argSession])
	if err != nil {
		return nil, err
	}
	defer release()
	text, err := s.prime(ctx, s.cfg.Service, c, req.Params.Arguments["seat"], maxTokens)
	if err != nil {
		return nil, fmt.Errorf("%s", strings.TrimSpace(string(errorDocument(err))))
	}
	seat := req.Params.Arguments["seat"]
	if seat == "" {
		seat = who.Actor
	}
	return &sdk.GetPromptResult{Description: "Resume " + seat,
		Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: text}}}}, nil
}
