package ledgerservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"tally/api"
	"tally/artifact"
	"tally/claim"
	"tally/digest"
	"tally/ledger"
	"tally/refuse"
	"tally/rest"
	"tally/service"
	"tally/store"
)

// The custody of artifacts' bytes: the content store beside the ledgers,
// which the claim core cannot reach (it does no I/O), so the service
// verifies a check's target before a record about it is appended and
// re-hashes stored copies on request.

// ArtifactReadError turns a content store error about what ("artifact X",
// "content D") into a refusal: damaged or not in the store.
func ArtifactReadError(what string, err error) error {
	var de *artifact.DamagedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &de):
		return refuse.New(service.CodeDamaged, "artifact", fmt.Sprintf("the stored copy of %s is damaged (content %s, read as %s); nothing was written", what, de.Want, de.Got))
	case errors.Is(err, artifact.ErrNotFound):
		return refuse.NotFoundf("artifact", "the bytes of "+what+" are not in the content store")
	}
	return err
}

// objectStore opens the content store beside the ledgers: the ledger
// directory's objects/, shared by every session in it.
func (s *Local) objectStore() (*artifact.Store, error) {
	if s.rootOf == nil {
		return nil, errors.New("service: no ledger directory for the content store (Config.Root)")
	}
	root, err := s.rootOf()
	if err != nil {
		return nil, err
	}
	objs, err := artifact.OpenStore(store.ObjectsDir(root))
	if err != nil {
		return nil, fmt.Errorf("open the content store: %w", err)
	}
	return objs, nil
}

// putBytes streams body into the content store and checks the stored
// copy's size: Put hashed the bytes as it wrote them, and the copy in place
// must be the one it wrote. It holds collections off (artifact.Store.Hold)
// until release is called, after the record naming the bytes is appended
// or refused; release is set even when it fails.
func (s *Local) putBytes(ctx context.Context, body io.Reader) (content digest.ContentDigest, size int64, release func(), err error) {
	release = func() {}
	if d, ok := body.(artifact.Declared); ok {
		// Declared bytes are not read, nor the store opened: a replica
		// applies the record the same whatever its own disk holds, or
		// fails to (its copy is fetched and receipted beside the log).
		return d.Content, d.Size, release, nil
	}
	objs, err := s.objectStore()
	if err != nil {
		return digest.ContentDigest{}, 0, release, err
	}
	if release, err = objs.Hold(); err != nil {
		return digest.ContentDigest{}, 0, func() {}, err
	}
	content, size, err = s.storeBytes(ctx, objs, body)
	return content, size, release, err
}

// storeBytes is putBytes's put. Bytes declared by their content
// (artifact.Declared: a cluster replica's, whose copy arrives beside the
// log) are not read: the record names them, and the node fetches them
// (putBytes answers them before it opens the store).
func (s *Local) storeBytes(ctx context.Context, objs *artifact.Store, body io.Reader) (digest.ContentDigest, int64, error) {
	if d, ok := body.(artifact.Declared); ok {
		return d.Content, d.Size, nil
	}
	return StoreBytes(ctx, objs, body)
}

// StoreBytes streams body into objs and checks the stored copy's size; a
// disk that fills is refused 507 InsufficientStorage, with nothing kept.
func StoreBytes(ctx context.Context, objs *artifact.Store, body io.Reader) (digest.ContentDigest, int64, error) {
	content, size, err := objs.Put(ctx, body)
	if artifact.IsNoSpace(err) {
		return content, size, rest.NewRefusal(http.StatusInsufficientStorage, service.CodeInsufficientStorage,
			fmt.Sprintf("the disk of this server's content store (%s) filled while it staged the bytes: nothing of them was kept (%v)", objs.Dir(), err))
	}
	if err != nil {
		return content, size, fmt.Errorf("store the bytes: %w", err)
	}
	if fi, err := os.Stat(objs.Path(content)); err != nil || fi.Size() != size {
		return content, size, fmt.Errorf("artifact store: the stored copy of %s is not %d bytes", content, size)
	}
	return content, size, nil
}

// Target is the artifact a check command is about, whose stored bytes are
// verified before a record that begins an attempt on it is appended: a
// begin's always, a report's unless an attempt on it already runs
// (OnlyIfNew).
type Target struct {
	Claim, Check, Artifact string
	OnlyIfNew              bool
}

// TargetOf is the target of a check command (a begin, a report); other
// commands have none.
func TargetOf(cmd claim.Command) (Target, bool) {
	switch c := cmd.(type) {
	case claim.BeginCheck:
		return Target{Claim: c.Claim, Check: c.Check, Artifact: c.Artifact}, true
	case claim.ReportVerdict:
		return Target{Claim: c.Claim, Check: c.Check, Artifact: c.Artifact, OnlyIfNew: true}, true
	}
	return Target{}, false
}

// GuardTarget verifies the stored bytes of a check command's target before
// the command is appended (CheckTarget), unless Config.TargetsVerified
// says the caller did.
func (s *Local) GuardTarget(ctx context.Context, c service.Call, cmd claim.Command) error {
	if s.targetsVerified {
		return nil
	}
	return s.CheckTarget(ctx, c, cmd)
}

// CheckTarget verifies the stored bytes of a check command's target in c's
// session, at c.Now (else the clock). Other commands pass, and so do a
// session without a log and an unknown claim or artifact: the claim core
// refuses those itself.
func (s *Local) CheckTarget(ctx context.Context, c service.Call, cmd claim.Command) error {
	t, ok := TargetOf(cmd)
	if !ok {
		return nil
	}
	l, err := s.sessions.Open(ctx, c.Tenant, c.Session, false)
	if r, rule := refuse.As(err); rule && r.Code == service.CodeNoSuchSession {
		return nil
	}
	if err != nil {
		return err
	}
	objs, err := s.objectStore()
	if err != nil {
		return err
	}
	return VerifyTarget(ctx, l, objs, t, s.at(c))
}

// VerifyTarget verifies the target's bytes before a record that begins an
// attempt on it is appended (see claim.View.TargetToVerify). An unknown
// claim or artifact passes: the core refuses it itself.
func VerifyTarget(ctx context.Context, l *ledger.Ledger, objs *artifact.Store, t Target, now time.Time) error {
	v, known := l.Claim(t.Claim, now)
	if !known {
		return nil
	}
	a, ok := v.TargetToVerify(t.Check, t.Artifact, t.OnlyIfNew)
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

// ArtifactRows lists the recorded artifacts of one claim, or of every claim
// when claimID is "", in creation order. A claim the ledger does not hold
// is refused.
func ArtifactRows(st *ledger.State, claimID string, now time.Time) ([]claim.StoredArtifact, error) {
	ids := []string{claimID}
	if claimID == "" {
		ids = ids[:0]
		for _, s := range st.Claims.List(claim.Filter{}, now) {
			ids = append(ids, s.Claim)
		}
	}
	var out []claim.StoredArtifact
	for _, id := range ids {
		v, ok := st.Claims.Claim(id, now)
		if !ok {
			return nil, claim.UnknownClaim(id)
		}
		for _, a := range v.Artifacts {
			out = append(out, claim.StoredArtifact{Claim: id, ArtifactView: a})
		}
	}
	return out, nil
}

// markPresent sets each row's Stored to present or missing, without
// reading the bytes.
func markPresent(objs *artifact.Store, rows []claim.StoredArtifact) {
	for i := range rows {
		rows[i].Stored = "missing"
		if cd, err := digest.ParseContentDigest(rows[i].Content); err == nil && objs.Has(cd) {
			rows[i].Stored = "present"
		}
	}
}

// verifyRows re-hashes the stored copy of each distinct content once and
// sets each row's Stored to ok, missing or damaged.
func verifyRows(ctx context.Context, objs *artifact.Store, rows []claim.StoredArtifact) error {
	seen := map[string]string{}
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
				return fmt.Errorf("verify %s of claim %s: %w", rows[i].Artifact, rows[i].Claim, err)
			}
			seen[rows[i].Content] = st
		}
		rows[i].Stored = st
	}
	return nil
}

// ArtifactsDoc is the document of an artifact listing.
func ArtifactsDoc(rows []claim.StoredArtifact) ([]byte, error) {
	if rows == nil {
		rows = []claim.StoredArtifact{}
	}
	b, err := json.Marshal(rows)
	if err != nil {
		return nil, fmt.Errorf("artifacts document: %w", err)
	}
	return api.Doc(api.M("artifacts", b)), nil
}

func (s *Local) ListArtifacts(ctx context.Context, c service.Call, q service.ArtifactQuery) (service.ArtifactList, error) {
	if q.Artifact != "" && q.Claim == "" {
		return service.ArtifactList{}, refuse.Invalidf("claim", "required with an artifact id")
	}
	l, err := s.read(ctx, c)
	if err != nil {
		return service.ArtifactList{}, err
	}
	objs, err := s.objectStore()
	if err != nil {
		return service.ArtifactList{}, err
	}
	var rows []claim.StoredArtifact
	l.Read(func(st *ledger.State) { rows, err = ArtifactRows(st, q.Claim, s.now().UTC()) })
	if err == nil && q.Artifact != "" {
		rows, err = claim.SelectArtifact(rows, q.Claim, q.Artifact)
	}
	if err != nil {
		return service.ArtifactList{}, err
	}
	if q.Verify {
		err = verifyRows(ctx, objs, rows)
	} else {
		markPresent(objs, rows)
	}
	if err != nil {
		return service.ArtifactList{}, err
	}
	doc, err := ArtifactsDoc(rows)
	return service.ArtifactList{Doc: service.Doc{JSON: doc}, Artifacts: rows}, err
}

// lookupArtifact finds artifact id of claim claimID in c's session, or
// refuses: no such claim, no such artifact.
func (s *Local) lookupArtifact(ctx context.Context, c service.Call, claimID, id string) (claim.ArtifactView, *artifact.Store, error) {
	l, err := s.read(ctx, c)
	if err != nil {
		return claim.ArtifactView{}, nil, err
	}
	objs, err := s.objectStore()
	if err != nil {
		return claim.ArtifactView{}, nil, err
	}
	var av claim.ArtifactView
	var known, ok bool
	l.Read(func(st *ledger.State) {
		_, known = st.Claims.Claim(claimID, s.now().UTC())
		av, ok = st.Claims.Artifact(claimID, id)
	})
	switch {
	case !known:
		return av, nil, claim.UnknownClaim(claimID)
	case !ok:
		return av, nil, claim.UnknownArtifact(claimID, id)
	}
	return av, objs, nil
}

func (s *Local) VerifyArtifact(ctx context.Context, c service.Call, claimID, id string) (service.ArtifactList, error) {
	av, objs, err := s.lookupArtifact(ctx, c, claimID, id)
	if err == nil {
		err = VerifyStored(ctx, objs, av)
	}
	if err != nil {
		return service.ArtifactList{}, err
	}
	rows := []claim.StoredArtifact{{Claim: claimID, ArtifactView: av, Stored: "ok"}}
	doc, err := ArtifactsDoc(rows)
	return service.ArtifactList{Doc: service.Doc{JSON: doc}, Artifacts: rows}, err
}

func (s *Local) Artifact(ctx context.Context, c service.Call, claimID, id string) (service.ArtifactContent, error) {
	av, objs, err := s.lookupArtifact(ctx, c, claimID, id)
	if err != nil {
		return service.ArtifactContent{}, err
	}
	return openContent(ctx, objs, "artifact "+av.Artifact, av)
}

func (s *Local) Content(ctx context.Context, c service.Call, content digest.ContentDigest) (service.ArtifactContent, error) {
	l, err := s.read(ctx, c)
	if err != nil {
		return service.ArtifactContent{}, err
	}
	objs, err := s.objectStore()
	if err != nil {
		return service.ArtifactContent{}, err
	}
	// The content store is shared by every session of the ledger
	// directory: only content an artifact of this session records is
	// served; any other is, as this session sees it, not in the store.
	var rows []claim.StoredArtifact
	l.Read(func(st *ledger.State) { rows, err = ArtifactRows(st, "", s.now().UTC()) })
	if err != nil {
		return service.ArtifactContent{}, err
	}
	what := "content " + content.String()
	for _, a := range rows {
		if a.Content == content.String() {
			return openContent(ctx, objs, what, a.ArtifactView)
		}
	}
	return service.ArtifactContent{}, ArtifactReadError(what, artifact.ErrNotFound)
}

// openContent opens the stored copy of av's content, verified before the
// first byte is read and hashed again as it is read.
func openContent(ctx context.Context, objs *artifact.Store, what string, av claim.ArtifactView) (service.ArtifactContent, error) {
	cd, err := digest.ParseContentDigest(av.Content)
	if err != nil {
		return service.ArtifactContent{}, fmt.Errorf("%s: %w", what, err)
	}
	rc, err := objs.Open(ctx, cd)
	if err != nil {
		return service.ArtifactContent{}, ArtifactReadError(what, err)
	}
	return service.ArtifactContent{Artifact: &av, Content: cd, Body: refusingReader{rc, what}, Checked: true}, nil
}

// refusingReader reports a read of the stored copy that fails (its bytes
// changed since they were verified) as the refusal reading them gives.
type refusingReader struct {
	io.ReadCloser
	what string
}

func (r refusingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = ArtifactReadError(r.what, err)
	}
	return n, err
}
