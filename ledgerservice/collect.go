package ledgerservice

import (
	"context"
	"errors"
	"fmt"
	"time"

	"tally/artifact"
	"tally/claim"
	"tally/digest"
	"tally/ledger"
	"tally/store"
)

// referencedContent is every content digest a record of a session of the
// ledger directory names (any claim's artifact, superseded or not). A
// session that cannot be read fails it: bytes are kept unless every log
// says nothing names them.
func (s *Local) referencedContent(ctx context.Context, root string) (map[digest.ContentDigest]bool, error) {
	sessions, err := store.Sessions(root, "")
	if err != nil {
		return nil, err
	}
	refs := map[digest.ContentDigest]bool{}
	now := s.now().UTC()
	for _, ss := range sessions {
		var rows []claim.StoredArtifact
		read := func(l *ledger.Ledger) {
			l.Read(func(st *ledger.State) { rows, err = ArtifactRows(st, "", now) })
		}
		var verr error
		if v, ok := s.sessions.(SessionVisitor); ok {
			verr = v.Visit(ctx, ss.Tenant, ss.Name, read)
		} else {
			var l *ledger.Ledger
			if l, verr = s.sessions.Open(ctx, ss.Tenant, ss.Name, false); verr == nil {
				read(l)
			}
		}
		if verr != nil {
			return nil, fmt.Errorf("session %s: %w", ss, verr)
		}
		if err != nil {
			return nil, fmt.Errorf("session %s: %w", ss, err)
		}
		for _, r := range rows {
			if d, perr := digest.ParseContentDigest(r.Content); perr == nil {
				refs[d] = true
			}
		}
	}
	return refs, nil
}

// ReferencedContent is every content digest a record of a session of the
// ledger directory names: what a collection keeps (a cluster node's
// decides with it too).
func (s *Local) ReferencedContent(ctx context.Context) (map[digest.ContentDigest]bool, error) {
	if s.rootOf == nil {
		return nil, errors.New("service: no ledger directory (Config.Root)")
	}
	root, err := s.rootOf()
	if err != nil {
		return nil, err
	}
	return s.referencedContent(ctx, root)
}

// CollectArtifacts removes from the content store the bytes no record of
// any session references (a refused publication's, an upload cut off)
// once they were last put more than grace ago, deciding under the store's
// collection lock, which every publication holds from its put to its
// append: bytes about to be referenced are never removed.
func (s *Local) CollectArtifacts(ctx context.Context, grace time.Duration) (artifact.Collected, error) {
	objs, err := s.objectStore()
	if err != nil {
		return artifact.Collected{}, err
	}
	root, err := s.rootOf()
	if err != nil {
		return artifact.Collected{}, err
	}
	return objs.Collect(ctx, time.Now(), grace, // files are stamped by the machine's clock, not the ledgers'
		func() (map[digest.ContentDigest]bool, error) {
			return s.referencedContent(ctx, root)
		})
}
