package server

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"tally/refuse"
	"tally/server/console"
	"tally/service"
	"tally/sessionname"
)

// The console's routes: the page itself (static files embedded in the
// binary) and the read-only routes it needs that the family routes cannot
// answer efficiently: a session's counts, one filtered and paged table over
// every family, a record's history with the state after each record, and
// the sessions a token may open. Every read goes through the same
// authentication as the family routes; none of them writes.

// ConsoleConfig bounds the console's reads.
type ConsoleConfig struct {
	// PageMax bounds the rows of one obligations page.
	PageMax int
	// AttentionMax bounds the items the summary lists as needing attention.
	AttentionMax int
}

func (c ConsoleConfig) withDefaults() ConsoleConfig {
	if c.PageMax <= 0 {
		c.PageMax = 500
	}
	if c.AttentionMax <= 0 {
		c.AttentionMax = 50
	}
	return c
}

func (s *Server) consoleRoutes() []route {
	return []route{
		{name: "console", method: "GET", pattern: "/{$}", summary: "The console: a web page over this API (sign in with a token)", handle: console.Index},
		{name: "console.config", method: "GET", pattern: "/console/config.json", summary: "What the console needs before sign-in: whether the server runs --insecure-dev (then no token is asked for)", handle: s.consoleConfig},
		{name: "console.asset", method: "GET", pattern: "/console/{file}", summary: "The console's script, style sheet and icon", handle: console.Asset},
		{name: "tenant.list", method: "GET", pattern: "/v1/tenants", summary: "The tenants the request may read (its token's; every tenant on disk in --insecure-dev), with the identity and role it acts as", handle: s.tenantList},
		{name: "session.list", method: "GET", pattern: "/v1/tenants/{tenant}/sessions", summary: "The tenant's sessions that hold a log (read only: opens and creates nothing)", handle: s.sessionList},
		{name: "session.summary", method: "GET", pattern: sessionPath + "/summary", summary: "Counts by family and state, and the items needing attention first: overdue promises, lapsed expectations, failed or overdue claims, less those a satisfied successor answered or a person dismissed (a fact attention.dismissed:FAMILY:ID) (now); seq is where the event stream resumes", handle: s.sessionSummary},
		{name: "obligation.list", method: "GET", pattern: sessionPath + "/obligations", summary: "Promises, claims and expectations as one table, filtered and paged on the server (family, state, by, to, party, q, attention=true, offset, limit, now)", handle: s.obligationList},
		{name: "promise.history", method: "GET", pattern: sessionPath + "/promises/{id}/history", summary: "Every record of one promise in log order, with its state after each", handle: s.recordHistory("promise")},
		{name: "claim.history", method: "GET", pattern: sessionPath + "/claims/{id}/history", summary: "Every record that changed one claim, in log order, with its state after each (a lifecycle to step through)", handle: s.recordHistory("claim")},
	}
}

func (s *Server) consoleConfig(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	writeDoc(w, http.StatusOK, expectDoc("insecure", s.cfg.Insecure))
}

func (s *Server) tenantList(w http.ResponseWriter, r *http.Request) {
	p, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	tenants := []string{}
	if p.tenant != "" {
		tenants = append(tenants, p.tenant)
	} else if s.cfg.Insecure {
		ss, err := s.browse.SessionList(r.Context(), service.Call{})
		if err != nil {
			s.writeError(w, err)
			return
		}
		for _, x := range ss {
			if !slices.Contains(tenants, x.Tenant) {
				tenants = append(tenants, x.Tenant)
			}
		}
	}
	writeDoc(w, http.StatusOK, expectDoc("tenants", tenants, "actor", p.actor, "role", p.role, "insecure", s.cfg.Insecure))
}

func (s *Server) sessionList(w http.ResponseWriter, r *http.Request) {
	if _, err := s.authenticate(r); err != nil {
		s.writeError(w, err)
		return
	}
	tenant := r.PathValue("tenant")
	if err := sessionname.Check("tenant", tenant); err != nil {
		s.writeError(w, badRequest{err.Error()})
		return
	}
	out, err := s.browse.SessionList(r.Context(), service.Call{Tenant: tenant})
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, expectDoc("tenant", tenant, "sessions", out))
}

// obligationFilter is the query of obligation.list.
type obligationFilter struct {
	family, state, by, to, party, q string
	attention                       bool
}

func (f obligationFilter) match(o *service.Obligation) bool {
	switch {
	case f.family != "" && o.Family != f.family,
		f.state != "" && o.State != f.state,
		f.by != "" && o.By != f.by,
		f.to != "" && o.To != f.to,
		f.party != "" && o.By != f.party && o.To != f.party,
		f.attention && o.Attention == "":
		return false
	}
	if f.q != "" {
		return strings.Contains(strings.ToLower(o.ID), f.q) || strings.Contains(strings.ToLower(o.Text), f.q)
	}
	return true
}

// attentionFirst orders rows needing attention first (overdue promises,
// then lapsed expectations, then failed or overdue claims, each oldest
// deadline first), then the rest, newest first within a family.
func attentionFirst(a, b service.Obligation) int {
	if (a.Attention != "") != (b.Attention != "") {
		if a.Attention != "" {
			return -1
		}
		return 1
	}
	if c := familyRank(a.Family) - familyRank(b.Family); c != 0 {
		return c
	}
	if a.Attention != "" && a.Due != nil && b.Due != nil && !a.Due.Equal(*b.Due) {
		return a.Due.Compare(*b.Due)
	}
	return cmp.Compare(b.Seq, a.Seq)
}

func familyRank(f string) int {
	switch f {
	case "promise":
		return 0
	case "expectation":
		return 1
	}
	return 2
}

func intParam(r *http.Request, name string, def, max int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > max {
		return 0, refuse.Invalidf(name, "must be an integer from 0 to "+strconv.Itoa(max))
	}
	return n, nil
}

func (s *Server) obligationList(w http.ResponseWriter, r *http.Request) {
	c, err := s.consoleCall(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	cfg := s.cfg.Console.withDefaults()
	q := r.URL.Query()
	f := obligationFilter{family: q.Get("family"), state: q.Get("state"), by: q.Get("by"), to: q.Get("to"),
		party: q.Get("party"), q: strings.ToLower(q.Get("q")), attention: q.Get("attention") == "true"}
	if f.family != "" && f.family != "promise" && f.family != "claim" && f.family != "expectation" {
		s.writeError(w, refuse.Invalidf("family", "must be promise, claim or expectation"))
		return
	}
	offset, err := intParam(r, "offset", 0, 1<<30)
	if err != nil {
		s.writeError(w, err)
		return
	}
	limit, err := intParam(r, "limit", 100, cfg.PageMax)
	if err != nil {
		s.writeError(w, err)
		return
	}
	t, err := s.browse.Obligations(r.Context(), c, service.ObligationQuery{Family: f.family, By: f.by, To: f.to})
	if err != nil {
		s.writeError(w, err)
		return
	}
	rows := t.Rows
	kept := rows[:0]
	for i := range rows {
		if f.match(&rows[i]) {
			kept = append(kept, rows[i])
		}
	}
	slices.SortStableFunc(kept, attentionFirst)
	total := len(kept)
	page := kept[min(offset, total):min(offset+limit, total)]
	writeDoc(w, http.StatusOK, expectDoc("now", t.Now, "seq", t.Seq, "total", total, "offset", offset, "rows", page))
}

// summaryCounts is one family's counts by state.
type summaryCounts struct {
	Total   int            `json:"total"`
	ByState map[string]int `json:"by_state"`
	// Attention counts the family's items needing attention: overdue
	// promises, failed or overdue claims, expectations with a lapse.
	Attention int            `json:"attention"`
	Lapses    map[string]int `json:"lapses,omitempty"` // expectations: lapses by kind
}

func (s *Server) sessionSummary(w http.ResponseWriter, r *http.Request) {
	c, err := s.consoleCall(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	cfg := s.cfg.Console.withDefaults()
	t, err := s.browse.Obligations(r.Context(), c, service.ObligationQuery{})
	if err != nil {
		s.writeError(w, err)
		return
	}
	rows, lapses := t.Rows, t.Lapses
	fam := map[string]*summaryCounts{}
	for _, name := range []string{"promise", "claim", "expectation"} {
		fam[name] = &summaryCounts{ByState: map[string]int{}}
	}
	fam["expectation"].Lapses = lapses
	var attention []service.Obligation
	for _, o := range rows {
		c := fam[o.Family]
		c.Total++
		c.ByState[o.State]++
		if o.Attention != "" {
			c.Attention++
			attention = append(attention, o)
		}
	}
	slices.SortStableFunc(attention, attentionFirst)
	attention = attention[:min(len(attention), cfg.AttentionMax)]
	if attention == nil {
		attention = []service.Obligation{}
	}
	writeDoc(w, http.StatusOK, expectDoc("now", t.Now, "seq", t.Seq, "promises", fam["promise"], "claims", fam["claim"],
		"expectations", fam["expectation"], "attention", attention))
}

// consoleCall authenticates a console read and is its Call: the path's
// session at the now query parameter (else the clock).
func (s *Server) consoleCall(r *http.Request) (service.Call, error) {
	if _, err := s.authenticate(r); err != nil {
		return service.Call{}, err
	}
	return s.readCall(r)
}

// recordHistory answers the history of the path's promise or claim
// (family), read through the Service.
func (s *Server) recordHistory(family string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.authenticate(r); err != nil {
			s.writeError(w, err)
			return
		}
		id := r.PathValue("id")
		steps, err := s.browse.History(r.Context(), sessionCall(r), family, id)
		if err != nil {
			s.writeError(w, err)
			return
		}
		writeDoc(w, http.StatusOK, expectDoc(family, id, "steps", steps))
	}
}
