package server

// Artifacts beyond put: a session's recorded artifacts with the custody of
// their bytes (list, and re-hash on verify), one artifact's custody check,
// bytes by artifact or by content digest, and the claim graph. Each runs
// through the service, as the CLI's verbs do on a local ledger, so a local
// verb and the same verb through the server answer alike.

import (
	"fmt"
	"io"
	"net/http"
	"strconv"

	"tally/api"
	"tally/claim"
	"tally/digest"
	"tally/refuse"
	"tally/rest"
	"tally/service"
)

// CodeDamaged is the error code of a stored copy whose bytes no longer
// match its digest.
const CodeDamaged = service.CodeDamaged

// DefaultMaxArtifactBytes is Config.MaxArtifactBytes unless set: 1 GiB.
// Other writes are commands bound by Config.BodyMax; an artifact is a file
// (a patch, a test log), streamed into the content store rather than held
// in memory.
const DefaultMaxArtifactBytes = 1 << 30

// ArtifactBodyMax is the byte routes' declared bound; the one applied is
// the server's (artifactMax).
const ArtifactBodyMax = DefaultMaxArtifactBytes

// artifactMax bounds the body of a byte route (an artifact, evidence):
// Config.MaxArtifactBytes, and no more than a Service that bounds its
// uploads takes.
func (s *Server) artifactMax() int64 {
	n := s.cfg.MaxArtifactBytes
	if ub, ok := s.local.(uploadBound); ok {
		n = min(n, ub.MaxUploadBytes())
	}
	return n
}

// artifactTooLarge refuses bytes over the server's limit: declared is the
// length the request declared, or -1 for a stream cut at the limit.
type artifactTooLarge struct {
	limit, declared int64
}

func (e *artifactTooLarge) Error() string {
	bound := fmt.Sprintf("this server's limit of %d bytes (%s, serve --max-artifact-bytes)", e.limit, byteSize(e.limit))
	if e.declared >= 0 {
		return fmt.Sprintf("body: %d bytes declared, over %s; nothing was stored", e.declared, bound)
	}
	return fmt.Sprintf("body: the bytes went past %s; the stream was cut there and nothing of it was kept", bound)
}

func (e *artifactTooLarge) Refusal() *rest.Refusal {
	return rest.NewRefusalWith(http.StatusRequestEntityTooLarge, service.CodeArtifactTooLarge, e.Error(),
		api.M("limit", api.U(uint64(e.limit))))
}

// byteSize writes n in the largest binary unit that divides it (64MiB),
// else in bytes.
func byteSize(n int64) string {
	for _, u := range []struct {
		name  string
		shift uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n > 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// StoredArtifact is one row of an artifact listing.
type StoredArtifact = claim.StoredArtifact

// queryOnly refuses a query parameter a read route does not take.
func queryOnly(r *http.Request, what string, names ...string) error {
	for k := range r.URL.Query() {
		known := false
		for _, n := range names {
			known = known || k == n
		}
		if !known {
			return refuse.Invalidf(k, fmt.Sprintf("is not a parameter of %s (%v)", what, names))
		}
	}
	return nil
}

// artifactList answers `tally artifact ls` (stored: present or missing)
// and, with verify=true, `tally artifact verify`: the server re-hashes its
// own stored copies and reports each (ok, missing or damaged). A report with
// bad copies is still a 200: the client decides its exit code from it.
func (s *Server) artifactList(r *http.Request) (int, any, error) {
	var aq api.ArtifactQuery
	if err := queryOnly(r, "an artifact listing", api.QueryNames(&aq)...); err != nil {
		return 0, nil, err
	}
	c := sessionCall(r)
	c.Actor = callerOf(r).actor
	if err := api.DecodeQuery(r.URL.Query(), &aq); err != nil {
		return 0, nil, err
	}
	res, err := s.local.ListArtifacts(r.Context(), c, aq)
	return http.StatusOK, res.JSON, err
}

// claimArtifactGet streams an artifact's bytes after verifying them against
// the recorded content digest; a damaged copy is refused, never served.
func (s *Server) claimArtifactGet(w http.ResponseWriter, r *http.Request) {
	c, err := s.readCall(r)
	var ac service.ArtifactContent
	if err == nil {
		ac, err = s.local.Artifact(r.Context(), c, r.PathValue("id"), r.PathValue("artifact"))
	}
	s.serveContent(w, "artifact "+r.PathValue("artifact"), ac, err)
}

// contentGet streams bytes by content digest: only content that an
// artifact of the path's session records (the content store is shared by
// every tenant of the ledger).
func (s *Server) contentGet(w http.ResponseWriter, r *http.Request) {
	c, err := s.readCall(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	cd, err := digest.ParseContentDigest(r.PathValue("content"))
	if err != nil {
		s.writeError(w, refuse.Invalidf("content", "must be a content digest (64 hex digits)"))
		return
	}
	ac, err := s.local.Content(r.Context(), c, cd)
	s.serveContent(w, "content "+cd.String(), ac, err)
}

// The byte routes (claimArtifactGet, contentGet) are streams: the bytes
// go out as they are read from the content store, never held whole.

// serveContent streams the bytes the service opened, verified before the
// first byte is sent and hashed again as they are read; the client checks
// the digest of what it receives too.
func (s *Server) serveContent(w http.ResponseWriter, what string, ac service.ArtifactContent, err error) {
	if err != nil {
		s.writeError(w, err)
		return
	}
	defer ac.Body.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(ac.Artifact.Size, 10))
	w.Header().Set("X-Tally-Digest", ac.Artifact.Digest)
	w.Header().Set("X-Tally-Content", ac.Artifact.Content)
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, ac.Body); err != nil {
		s.cfg.Logger.Error("serving artifact bytes", "what", what, "err", err)
	}
}
