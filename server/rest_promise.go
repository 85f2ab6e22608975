package server

import (
	"net/http"

	"tally/api"
	"tally/service"
)

// The promise routes' bodies are api's promise documents; the path names
// the promise, so a body's id, if given, must name the same.

func (s *Server) declare(r *http.Request, c service.Call, d *api.PromiseDeclare) (service.Doc, error) {
	if s.stubWrite != nil {
		cmd, err := d.Command(s.cfg.Ledger.Now())
		if err != nil {
			return service.Doc{}, err
		}
		// The session is opened as a write would, so the baseline
		// counts the cache.
		if _, err := s.sessionIn(r.Context(), c.Tenant, c.Session, true); err != nil {
			return service.Doc{}, err
		}
		return service.Doc{JSON: s.stubWrite(cmd, callerOf(r))}, nil
	}
	res, err := s.local.DeclarePromise(r.Context(), c, *d)
	return res.Doc, err
}

// whoami answers with the identity the request acts as: what the CLI, as a
// client, prints and acts as when no --as is given.
func (s *Server) whoami(r *http.Request) (int, any, error) {
	p := callerOf(r)
	return http.StatusOK, api.Doc(api.M("tenant", api.S(r.PathValue("tenant"))), api.M("actor", api.S(p.actor)), api.M("role", api.S(p.role))), nil
}

// The promise documents' ids, which the path's {id} sets.
func amendID(d *api.PromiseAmend) *string     { return &d.ID }
func resolveID(d *api.PromiseResolve) *string { return &d.ID }
func assessID(d *api.PromiseAssess) *string   { return &d.ID }
