package server

// Artifacts beyond put and get: a session's recorded artifacts with the
// custody of their bytes (list, and re-hash on verify), one artifact's
// custody check, bytes by content digest, and the claim graph. The listing,
// the custody checks and their refusals are also what the CLI runs on a
// local ledger, so a local verb and the same verb through the server answer
// alike.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"tally/artifact"
	"tally/claim"
	"tally/digest"
	"tally/jsondoc"
	"tally/ledger"
	"tally/rule"
)

// CodeDamaged is the error code of a stored copy whose bytes no longer
// match its digest.
const CodeDamaged rule.Code = "damaged"

// ArtifactBodyMax bounds the body of an artifact PUT. Other writes are
// commands bound by Config.BodyMax; an artifact is a file (a patch, a test
// log), streamed into the content store rather than held in memory.
const ArtifactBodyMax = 1 << 30

// ArtifactReadError turns a content store error about what ("artifact X",
// "content D") into a refusal: damaged or not in the store.
func ArtifactReadError(what string, err error) error {
	var de *artifact.DamagedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &de):
		return rule.New(CodeDamaged, "artifact", fmt.Sprintf("the stored copy of %s is damaged (content %s, read as %s); nothing was written", what, de.Want, de.Got))
	case errors.Is(err, artifact.ErrNotFound):
		return rule.NotFoundf("artifact", "the bytes of "+what+" are not in the content store")
	}
	return err
}

// StoredArtifact is one row of `tally artifact ls` and `tally artifact
// verify`: a recorded artifact and the state of its bytes.
type StoredArtifact struct {
	Claim string `json:"claim"`
	claim.ArtifactView
	Stored string `json:"stored"` // present | missing (ls); ok | missing | damaged (verify)
}

// ArtifactRows lists the recorded artifacts of one claim, or of every claim
// when claimID is "", in creation order. A claim the ledger does not hold
// is refused.
func ArtifactRows(st *ledger.State, claimID string, now time.Time) ([]StoredArtifact, error) {
	ids := []string{claimID}
	if claimID == "" {
		ids = ids[:0]
		for _, s := range st.Claims.List(claim.Filter{}, now) {
			ids = append(ids, s.Claim)
		}
	}
	var out []StoredArtifact
	for _, id := range ids {
		v, ok := st.Claims.Claim(id, now)
		if !ok {
			return nil, unknownClaim(id)
		}
		for _, a := range v.Artifacts {
			out = append(out, StoredArtifact{Claim: id, ArtifactView: a})
		}
	}
	return out, nil
}

func unknownClaim(id string) error { return rule.NotFoundf("claim", "no claim "+strconv.Quote(id)) }

// UnknownArtifact is the refusal for an artifact a claim does not record.
func UnknownArtifact(claimID, id string) error {
	return rule.NotFoundf("artifact", "claim "+claimID+" has no artifact "+strconv.Quote(id))
}

// SelectArtifact keeps the rows of artifact id of claimID; none is refused.
func SelectArtifact(rows []StoredArtifact, claimID, id string) ([]StoredArtifact, error) {
	var one []StoredArtifact
	for _, a := range rows {
		if a.Claim == claimID && a.Artifact == id {
			one = append(one, a)
		}
	}
	if len(one) == 0 {
		return nil, UnknownArtifact(claimID, id)
	}
	return one, nil
}

// MarkPresent sets each row's Stored to present or missing, without
// reading the bytes.
func MarkPresent(objs *artifact.Store, rows []StoredArtifact) {
	for i := range rows {
		rows[i].Stored = "missing"
		if cd, err := digest.ParseContentDigest(rows[i].Content); err == nil && objs.Has(cd) {
			rows[i].Stored = "present"
		}
	}
}

// VerifyRows re-hashes the stored copy of each distinct content once and
// sets each row's Stored to ok, missing or damaged. It returns how many rows
// are not ok.
func VerifyRows(ctx context.Context, objs *artifact.Store, rows []StoredArtifact) (int, error) {
	seen := map[string]string{}
	bad := 0
	for i := range rows {
		st, ok := seen[rows[i].Content]
		if !ok {
			st = "ok"
			cd, err := digest.ParseContentDigest(rows[i].Content)
			if err == nil {
				err = objs.Verify(ctx, cd)
			}
			switch {
			case err == nil:
			case errors.Is(err, artifact.ErrNotFound):
				st = "missing"
			case artifact.IsDamaged(err):
				st = "damaged"
			default:
				return 0, fmt.Errorf("verify %s of claim %s: %w", rows[i].Artifact, rows[i].Claim, err)
			}
			seen[rows[i].Content] = st
		}
		rows[i].Stored = st
		if st != "ok" {
			bad++
		}
	}
	return bad, nil
}

// ArtifactsDoc is the document `tally artifact ls|verify --json` prints.
func ArtifactsDoc(rows []StoredArtifact) ([]byte, error) {
	if rows == nil {
		rows = []StoredArtifact{}
	}
	b, err := json.Marshal(rows)
	if err != nil {
		return nil, fmt.Errorf("artifacts document: %w", err)
	}
	return jsondoc.Doc(jsondoc.M("artifacts", b)), nil
}

// ViewArtifact returns artifact id as a claim's view records it.
func ViewArtifact(v *claim.View, id string) (claim.ArtifactView, bool) {
	for _, a := range v.Artifacts {
		if a.Artifact == id {
			return a, true
		}
	}
	return claim.ArtifactView{}, false
}

// AttemptOn returns the check a claim view declares and its attempt on
// artifact art (nil when there is none yet, or no such check).
func AttemptOn(v *claim.View, check, art string) (*claim.CheckView, *claim.AttemptView) {
	for i := range v.Slots {
		for j := range v.Slots[i].Checks {
			ch := &v.Slots[i].Checks[j]
			if ch.ID != check {
				continue
			}
			for k := range ch.Targets {
				if ch.Targets[k].Artifact == art {
					return ch, &ch.Targets[k]
				}
			}
			return ch, nil
		}
	}
	return nil, nil
}

// TargetToVerify reports whether a check record on artifact art must first
// verify the target's bytes, and returns the artifact. It need not when the
// artifact is unknown (the ledger refuses that itself), nor, with onlyIfNew
// (a report), when an attempt on it is already running: its bytes were
// verified when the attempt began.
func TargetToVerify(v *claim.View, check, art string, onlyIfNew bool) (claim.ArtifactView, bool) {
	a, ok := ViewArtifact(v, art)
	if !ok {
		return a, false
	}
	if onlyIfNew {
		if _, at := AttemptOn(v, check, art); at != nil && at.State == "running" {
			return a, false
		}
	}
	return a, true
}

// VerifyTarget verifies the target's bytes before a record that begins an
// attempt on it is appended: the claim core does no I/O, so every writer of
// check records (the CLI and the server) calls this first.
func VerifyTarget(ctx context.Context, l *ledger.Ledger, objs *artifact.Store, claimID, check, art string, onlyIfNew bool, now time.Time) error {
	var v claim.View
	var known bool
	v, known = l.Claim(claimID, now)
	if !known {
		return nil
	}
	a, ok := TargetToVerify(&v, check, art, onlyIfNew)
	if !ok {
		return nil
	}
	return VerifyStored(ctx, objs, a)
}

// VerifyStored re-hashes a recorded artifact's stored copy.
func VerifyStored(ctx context.Context, objs *artifact.Store, a claim.ArtifactView) error {
	d, err := digest.ParseContentDigest(a.Content)
	if err != nil {
		return fmt.Errorf("artifact %s: %w", a.Artifact, err)
	}
	return ArtifactReadError("artifact "+a.Artifact, objs.Verify(ctx, d))
}

// ClaimGraphDoc is the document `tally claim graph --format json` prints:
// every claim with its state, and every relation between claims.
func ClaimGraphDoc(nodes []claim.Summary, edges []claim.Edge) ([]byte, error) {
	type node struct {
		Claim string       `json:"claim"`
		State claim.Status `json:"state"`
	}
	ns := make([]node, len(nodes))
	for i, n := range nodes {
		ns[i] = node{n.Claim, n.State}
	}
	if edges == nil {
		edges = []claim.Edge{}
	}
	nb, err := json.Marshal(ns)
	if err != nil {
		return nil, fmt.Errorf("claim graph: %w", err)
	}
	eb, err := json.Marshal(edges)
	if err != nil {
		return nil, fmt.Errorf("claim graph: %w", err)
	}
	return jsondoc.Doc(jsondoc.M("claims", nb), jsondoc.M("edges", eb)), nil
}

// queryOnly refuses a query parameter a read route does not take.
func queryOnly(r *http.Request, what string, names ...string) error {
	for k := range r.URL.Query() {
		known := false
		for _, n := range names {
			known = known || k == n
		}
		if !known {
			return rule.Invalidf(k, fmt.Sprintf("is not a parameter of %s (%v)", what, names))
		}
	}
	return nil
}

// artifactList answers `tally artifact ls` (stored: present or missing)
// and, with verify=true, `tally artifact verify`: the server re-hashes its
// own stored copies and reports each (ok, missing or damaged). A report with
// bad copies is still a 200: the client decides its exit code from it.
func (s *Server) artifactList(w http.ResponseWriter, r *http.Request) {
	l, objs, err := s.openReadObjects(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if err := queryOnly(r, "an artifact listing", "claim", "artifact", "verify"); err != nil {
		s.writeError(w, err)
		return
	}
	q := r.URL.Query()
	claimID, id := q.Get("claim"), q.Get("artifact")
	verify := false
	if v := q.Get("verify"); v != "" {
		if verify, err = strconv.ParseBool(v); err != nil {
			s.writeError(w, rule.Invalidf("verify", "must be true or false"))
			return
		}
	}
	if id != "" && claimID == "" {
		s.writeError(w, rule.Invalidf("claim", "required with an artifact id"))
		return
	}
	var rows []StoredArtifact
	l.Read(func(st *ledger.State) {
		rows, err = ArtifactRows(st, claimID, s.cfg.Ledger.Now().UTC())
	})
	if err == nil && id != "" {
		rows, err = SelectArtifact(rows, claimID, id)
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	if verify {
		_, err = VerifyRows(r.Context(), objs, rows)
	} else {
		MarkPresent(objs, rows)
	}
	var doc []byte
	if err == nil {
		doc, err = ArtifactsDoc(rows)
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, doc)
}

// openReadObjects is openRead and the content store.
func (s *Server) openReadObjects(r *http.Request) (*ledger.Ledger, *artifact.Store, error) {
	l, err := s.openRead(r)
	if err != nil {
		return nil, nil, err
	}
	objs, err := s.objects()
	return l, objs, err
}

// lookupArtifact finds artifact a of claim id in the path's session, or
// refuses: no such claim, no such artifact.
func (s *Server) lookupArtifact(r *http.Request) (claim.ArtifactView, *artifact.Store, error) {
	l, objs, err := s.openReadObjects(r)
	if err != nil {
		return claim.ArtifactView{}, nil, err
	}
	id, a := r.PathValue("id"), r.PathValue("artifact")
	var av claim.ArtifactView
	var known, ok bool
	l.Read(func(st *ledger.State) {
		_, known = st.Claims.Claim(id, s.cfg.Ledger.Now().UTC())
		av, ok = st.Claims.Artifact(id, a)
	})
	switch {
	case !known:
		return av, nil, unknownClaim(id)
	case !ok:
		return av, nil, UnknownArtifact(id, a)
	}
	return av, objs, nil
}

// artifactVerifyOne re-hashes one artifact's stored copy: 200 with its row
// when intact, else the refusal reading its bytes would give. A client
// checks the target this way before it uploads evidence about it.
func (s *Server) artifactVerifyOne(w http.ResponseWriter, r *http.Request) {
	av, objs, err := s.lookupArtifact(r)
	var doc []byte
	if err == nil {
		err = VerifyStored(r.Context(), objs, av)
	}
	if err == nil {
		doc, err = ArtifactsDoc([]StoredArtifact{{Claim: r.PathValue("id"), ArtifactView: av, Stored: "ok"}})
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, doc)
}

// claimArtifactGet streams an artifact's bytes after verifying them against
// the recorded content digest; a damaged copy is refused, never served.
func (s *Server) claimArtifactGet(w http.ResponseWriter, r *http.Request) {
	av, objs, err := s.lookupArtifact(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	s.serveContent(w, r, objs, "artifact "+av.Artifact, av)
}

// contentGet streams bytes by content digest. The content store is shared
// by every tenant of the ledger, so only content that an artifact of the
// path's session records is served; any other digest is, as this session
// sees it, not in the store.
func (s *Server) contentGet(w http.ResponseWriter, r *http.Request) {
	l, objs, err := s.openReadObjects(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	c := r.PathValue("content")
	if _, err := digest.ParseContentDigest(c); err != nil {
		s.writeError(w, rule.Invalidf("content", "must be a content digest (64 hex digits)"))
		return
	}
	var rows []StoredArtifact
	l.Read(func(st *ledger.State) { rows, err = ArtifactRows(st, "", s.cfg.Ledger.Now().UTC()) })
	if err != nil {
		s.writeError(w, err)
		return
	}
	for _, a := range rows {
		if a.Content == c {
			s.serveContent(w, r, objs, "content "+c, a.ArtifactView)
			return
		}
	}
	s.writeError(w, ArtifactReadError("content "+c, artifact.ErrNotFound))
}

// serveContent streams the stored copy of av's content, verified before the
// first byte is sent and hashed again as it is read; the client checks the
// digest of what it receives too.
func (s *Server) serveContent(w http.ResponseWriter, r *http.Request, objs *artifact.Store, what string, av claim.ArtifactView) {
	cd, err := digest.ParseContentDigest(av.Content)
	if err != nil {
		s.writeError(w, fmt.Errorf("%s: %w", what, err))
		return
	}
	rc, err := objs.Open(r.Context(), cd)
	if err != nil {
		s.writeError(w, ArtifactReadError(what, err))
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(av.Size, 10))
	w.Header().Set("X-Tally-Digest", av.Digest)
	w.Header().Set("X-Tally-Content", av.Content)
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, rc); err != nil {
		s.cfg.Logger.Error("serving artifact bytes", "what", what, "err", err)
	}
}

// claimGraph answers `tally claim graph`: every claim's state and every
// relation between claims (now).
func (s *Server) claimGraph(w http.ResponseWriter, r *http.Request) {
	l, now, err := s.openReadAt(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	var edges []claim.Edge
	var nodes []claim.Summary
	l.Read(func(st *ledger.State) {
		edges = st.Claims.Graph()
		nodes = st.Claims.List(claim.Filter{}, now)
	})
	doc, err := ClaimGraphDoc(nodes, edges)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, doc)
}
