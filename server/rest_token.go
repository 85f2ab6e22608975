package server

import (
	"net/http"

	"tally/api"
	"tally/auth"
	"tally/refuse"
)

// The token routes: `tally token` through a server. An admin-role token
// manages the tokens of its tenant; a token of every tenant ("*", what a
// cluster's bootstrap prints) manages every tenant's. Tokens live where the
// server keeps them (Config.Tokens): the ledger directory's file, or a
// cluster's meta group, so a token made through any node works on every
// node and a revocation reaches every node.
func (s *Server) tokenRoutes() []route {
	return []route{
		{name: "token.create", method: "POST", pattern: "/v1/tokens", summary: "Mint a token (admin of its tenant, or of every tenant); the secret is in this answer only", body: "TokenCreate", write: true, serve: s.createToken},
		{name: "token.list", method: "GET", pattern: "/v1/tokens", summary: "The tokens the caller administers (never their secrets), revoked ones included", serve: s.listTokens},
		{name: "token.revoke", method: "POST", pattern: "/v1/tokens/{id}/revoke", summary: "Revoke a token the caller administers; every node refuses it once the revocation is applied there", write: true, serve: s.revokeToken},
	}
}

// administers reports whether the caller may manage tenant's tokens.
func (s *Server) administers(r *http.Request, tenant string) bool {
	if s.cfg.Insecure {
		return true
	}
	p := callerOf(r)
	return auth.Token{Tenant: p.tenant, Role: p.role}.Administers(tenant)
}

func (s *Server) createToken(r *http.Request) (int, any, error) {
	body, err := readBody(r)
	if err != nil {
		return 0, nil, err
	}
	var d api.TokenCreate
	if err := api.Decode("body", body, &d); err != nil {
		return 0, nil, err
	}
	if err := auth.Check(d.Tenant, d.Participant, d.Role); err != nil {
		return 0, nil, err
	}
	if !s.administers(r, d.Tenant) {
		return 0, nil, refuse.Forbiddenf("tenant", "this token does not administer the tokens of tenant "+d.Tenant+" (an admin of that tenant, or of every tenant, does)")
	}
	secret, tok, err := s.tokens.CreateToken(r.Context(), d.Tenant, d.Participant, d.Role, s.cfg.Ledger.Now())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, api.TokenCreated(secret, tok), nil
}

func (s *Server) listTokens(r *http.Request) (int, any, error) {
	if err := queryOnly(r, "a token listing"); err != nil {
		return 0, nil, err
	}
	all, err := s.tokens.ListTokens(r.Context())
	if err != nil {
		return 0, nil, err
	}
	mine := all[:0]
	for _, t := range all {
		if s.administers(r, t.Tenant) {
			mine = append(mine, t)
		}
	}
	if len(mine) == 0 && !s.administers(r, callerOf(r).tenant) {
		return 0, nil, refuse.Forbiddenf("role", "listing tokens takes an admin-role token")
	}
	return http.StatusOK, api.TokenList(mine), nil
}

func (s *Server) revokeToken(r *http.Request) (int, any, error) {
	id := r.PathValue("id")
	all, err := s.tokens.ListTokens(r.Context())
	if err != nil {
		return 0, nil, err
	}
	for _, t := range all {
		if t.ID != id {
			continue
		}
		if !s.administers(r, t.Tenant) {
			break // as unknown: a caller learns nothing of another tenant's tokens
		}
		tok, err := s.tokens.RevokeToken(r.Context(), id, s.cfg.Ledger.Now())
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, api.TokenRevoked(tok), nil
	}
	return 0, nil, refuse.NotFoundf("id", "no token "+id+" among those this token administers")
}
