package ledgerservice

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"tally/api"
	"tally/claim"
	"tally/instant"
	"tally/ledger"
	"tally/refuse"
	"tally/service"
)

// The claims family on this machine's ledgers. A write's request id is
// bound to the method and its api document as given; the documents of the
// writes that carry bytes (an artifact, a verdict's evidence) bind the
// content digest of those bytes too, so the same id with other bytes is a
// conflict.

var _ service.Claims = (*Local)(nil)

// claimWrite runs cmd, the command of the api document doc given to
// method, and answers with the records it appended and claim id as the
// write left it.
func (s *Local) claimWrite(ctx context.Context, c service.Call, method string, doc any, id string, cmd claim.Command) (service.ClaimWritten, error) {
	var out service.ClaimWritten
	rendered := false
	render := func(st *ledger.State, res []ledger.Result) []byte {
		v, _ := st.Claims.Claim(id, s.now().UTC())
		out.Claim, out.Notes, rendered = v, ClaimNotes(cmd, &v), true
		return ClaimWriteDoc(res, &v, out.Notes...)
	}
	d, res, err := s.execute(ctx, c, write{method: method, doc: doc, cmd: ledger.Command{Claim: cmd}, render: render})
	if err != nil {
		return service.ClaimWritten{}, err
	}
	if !rendered { // a replay: the recorded document is the answer
		return service.ReadClaimWritten(d)
	}
	out.Doc = d
	for _, r := range res {
		out.Records = append(out.Records, service.ClaimRecord{Type: r.Type, Line: r.Line})
	}
	return out, nil
}

// ClaimNotes are what the write of cmd says beside its records, the claim
// then being v: that a successor inherited its predecessor's terms.
func ClaimNotes(cmd claim.Command, v *claim.View) []string {
	if c, ok := cmd.(claim.Create); ok {
		if n := claim.InheritNote(c, v); n != "" {
			return []string{n}
		}
	}
	return nil
}

// ClaimWriteDoc is the document a claim write answers with:
// {"records":[lines…],"claim":VIEW}, and "notes":[…] when the write has
// something to say beside them.
func ClaimWriteDoc(res []ledger.Result, v *claim.View, notes ...string) []byte {
	recs := []byte{'['}
	for i, r := range res {
		if i > 0 {
			recs = append(recs, ',')
		}
		recs = append(recs, r.Line...)
	}
	recs = append(recs, ']')
	vb, err := json.Marshal(v)
	if err != nil {
		vb = []byte("null")
	}
	if len(notes) > 0 {
		nb, _ := json.Marshal(notes)
		return api.Doc(api.M("records", recs), api.M("claim", vb), api.M("notes", nb))
	}
	return api.Doc(api.M("records", recs), api.M("claim", vb))
}

func (s *Local) CreateClaim(ctx context.Context, c service.Call, d api.ClaimCreate) (service.ClaimWritten, error) {
	cmd, err := d.Command(s.now())
	if err != nil {
		return service.ClaimWritten{}, err
	}
	// No slots given and an empty list of them ask the same.
	doc := d
	if doc.Slots == nil {
		doc.Slots = []claim.SlotSpec{}
	}
	return s.claimWrite(ctx, c, service.MethodCreateClaim, doc, d.Claim, cmd)
}

func (s *Local) PostClaim(ctx context.Context, c service.Call, d api.ClaimPost) (service.ClaimWritten, error) {
	return s.claimWrite(ctx, c, service.MethodPostClaim, d, d.Claim, d.Command())
}

func (s *Local) CancelClaim(ctx context.Context, c service.Call, d api.ClaimEnd) (service.ClaimWritten, error) {
	return s.claimWrite(ctx, c, service.MethodCancelClaim, d, d.Claim, d.Cancel())
}

func (s *Local) RevokeClaim(ctx context.Context, c service.Call, d api.ClaimEnd) (service.ClaimWritten, error) {
	return s.claimWrite(ctx, c, service.MethodRevokeClaim, d, d.Claim, d.Revoke())
}

func (s *Local) SupersedeClaim(ctx context.Context, c service.Call, d api.ClaimSupersede) (service.ClaimWritten, error) {
	return s.claimWrite(ctx, c, service.MethodSupersedeClaim, d, d.Claim, d.Command())
}

func (s *Local) AcquireReceipt(ctx context.Context, c service.Call, d api.ClaimReceipt) (service.ClaimWritten, error) {
	return s.claimWrite(ctx, c, service.MethodAcquireReceipt, d, d.Claim, d.Command())
}

func (s *Local) AdoptReceipt(ctx context.Context, c service.Call, d api.ClaimAdopt) (service.ClaimWritten, error) {
	return s.claimWrite(ctx, c, service.MethodAdoptReceipt, d, d.Claim, d.Command())
}

func (s *Local) RecordProgress(ctx context.Context, c service.Call, d api.ClaimProgress) (service.ClaimWritten, error) {
	return s.claimWrite(ctx, c, service.MethodRecordProgress, d, d.Claim, d.Command())
}

func (s *Local) CloseTestament(ctx context.Context, c service.Call, d api.ClaimTestament) (service.ClaimWritten, error) {
	cmd, err := d.Command()
	if err != nil {
		return service.ClaimWritten{}, err
	}
	return s.claimWrite(ctx, c, service.MethodCloseTestament, d, d.Claim, cmd)
}

func (s *Local) PostTestament(ctx context.Context, c service.Call, d api.ClaimTestamentRef) (service.ClaimWritten, error) {
	return s.claimWrite(ctx, c, service.MethodPostTestament, d, d.Claim, d.Post())
}

func (s *Local) ReceiveTestament(ctx context.Context, c service.Call, d api.ClaimTestamentRef) (service.ClaimWritten, error) {
	return s.claimWrite(ctx, c, service.MethodReceiveTestament, d, d.Claim, d.Receive())
}

func (s *Local) CommitDeadline(ctx context.Context, c service.Call, d api.ClaimRef) (service.ClaimWritten, error) {
	return s.claimWrite(ctx, c, service.MethodCommitDeadline, d, d.Claim, claim.CommitDeadline{Claim: d.Claim})
}

func (s *Local) CommitDependency(ctx context.Context, c service.Call, d api.ClaimRef) (service.ClaimWritten, error) {
	return s.claimWrite(ctx, c, service.MethodCommitDependency, d, d.Claim, claim.CommitDependency{Claim: d.Claim})
}

func (s *Local) BeginCheck(ctx context.Context, c service.Call, d api.ClaimBegin) (service.ClaimWritten, error) {
	if err := s.GuardTarget(ctx, c, d.Command()); err != nil {
		return service.ClaimWritten{}, err
	}
	return s.claimWrite(ctx, c, service.MethodBeginCheck, d, d.Claim, d.Command())
}

// evidenceDoc is what a request id of a verdict with evidence is bound
// to: the verdict's document, the evidence's description as given, and
// the content of its bytes.
type evidenceDoc struct {
	api.ClaimCheck
	Name    string `json:"name,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Schema  string `json:"schema,omitempty"`
	Content string `json:"content"`
}

func (s *Local) ReportCheck(ctx context.Context, c service.Call, d api.ClaimCheck, ev *service.Evidence) (service.ClaimWritten, error) {
	cmd := d.Report()
	if ev == nil {
		if err := s.GuardTarget(ctx, c, cmd); err != nil {
			return service.ClaimWritten{}, err
		}
		return s.claimWrite(ctx, c, service.MethodReportCheck, d, d.Claim, cmd)
	}
	if err := EvidenceNamed(d); err != nil {
		return service.ClaimWritten{}, err
	}
	// The target's bytes are verified before the evidence is stored.
	if err := s.GuardTarget(ctx, c, cmd); err != nil {
		return service.ClaimWritten{}, err
	}
	content, size, release, err := s.putBytes(ctx, ev.Body)
	defer release()
	if err != nil {
		return service.ClaimWritten{}, err
	}
	cmd.Evidence = ""
	cmd.Publish = &claim.PublishArtifact{Claim: d.Claim, Artifact: d.Evidence, Role: claim.RoleResult,
		Kind: cmp.Or(ev.Kind, "evidence"), Schema: ev.Schema, Name: cmp.Or(ev.Name, d.Evidence), Content: content, Size: size}
	doc := evidenceDoc{ClaimCheck: d, Name: ev.Name, Kind: ev.Kind, Schema: ev.Schema, Content: content.String()}
	return s.claimWrite(ctx, c, service.MethodReportCheck, doc, d.Claim, cmd)
}

// EvidenceNamed refuses a verdict that carries evidence bytes without
// naming its target artifact and the evidence's id, before any byte is
// stored.
func EvidenceNamed(d api.ClaimCheck) error {
	for _, f := range [][2]string{{"artifact", d.Artifact}, {"evidence", d.Evidence}} {
		if f[1] == "" {
			return refuse.Invalidf(f[0], "required")
		}
	}
	return nil
}

// publishDoc is what a request id of an artifact's publication is bound
// to: its description as given and the content of its bytes.
type publishDoc struct {
	api.ClaimPublish
	Content string `json:"content"`
}

func (s *Local) PublishArtifact(ctx context.Context, c service.Call, d api.ClaimPublish, body io.Reader) (service.ClaimWritten, error) {
	content, size, release, err := s.putBytes(ctx, body)
	defer release()
	if err != nil {
		return service.ClaimWritten{}, err
	}
	cmd := d.Command()
	// The role and kind default in the claim core; the name is the id.
	cmd.Name = cmp.Or(cmd.Name, d.Artifact)
	cmd.Content, cmd.Size = content, size
	return s.claimWrite(ctx, c, service.MethodPublishArtifact, publishDoc{ClaimPublish: d, Content: content.String()}, d.Claim, cmd)
}

func (s *Local) ReceiveArtifact(ctx context.Context, c service.Call, d api.ClaimArtifactRef) (service.ClaimWritten, error) {
	return s.claimWrite(ctx, c, service.MethodReceiveArtifact, d, d.Claim, d.Command())
}

func (s *Local) Claim(ctx context.Context, c service.Call, id string) (service.ClaimShown, error) {
	l, err := s.read(ctx, c)
	if err != nil {
		return service.ClaimShown{}, err
	}
	now := s.at(c)
	v, ok := l.Claim(id, now)
	if !ok {
		return service.ClaimShown{}, claim.UnknownClaim(id)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return service.ClaimShown{}, fmt.Errorf("claim %s: %w", id, err)
	}
	doc := api.Doc(api.M("now", api.S(instant.Format(now))), api.M("claim", b))
	return service.ClaimShown{Doc: service.Doc{JSON: doc}, Now: now, Claim: v}, nil
}

func (s *Local) ListClaims(ctx context.Context, c service.Call, f claim.Filter) (service.ClaimList, error) {
	l, err := s.read(ctx, c)
	if err != nil {
		return service.ClaimList{}, err
	}
	now := s.at(c)
	list := l.Claims(f, now)
	b, err := json.Marshal(list)
	if err != nil {
		return service.ClaimList{}, fmt.Errorf("claims: %w", err)
	}
	doc := api.Doc(api.M("now", api.S(instant.Format(now))), api.M("claims", b))
	return service.ClaimList{Doc: service.Doc{JSON: doc}, Now: now, Claims: list}, nil
}

func (s *Local) ClaimGraph(ctx context.Context, c service.Call) (service.ClaimGraph, error) {
	l, err := s.read(ctx, c)
	if err != nil {
		return service.ClaimGraph{}, err
	}
	now := s.at(c)
	var g service.ClaimGraph
	l.Read(func(st *ledger.State) {
		g.Edges = st.Claims.Graph()
		g.Claims = st.Claims.List(claim.Filter{}, now)
	})
	g.JSON, err = ClaimGraphDoc(g.Claims, g.Edges)
	return g, err
}

// ClaimGraphDoc is the claim graph's document: every claim with its state,
// and every relation between claims.
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
	return api.Doc(api.M("claims", nb), api.M("edges", eb)), nil
}
