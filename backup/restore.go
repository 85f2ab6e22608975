package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"tally/artifact"
	"tally/store"
)

// Restore writes the backup r reads into root, a ledger directory (made if
// need be) that holds no session: its settings, each session's log as the
// backup holds it, and its objects into root's content store, every byte
// verified as it is written. It refuses a damaged or truncated file where it finds the
// damage, leaving what it wrote so far: a caller that must write nothing
// from a damaged file verifies it first (Verify), and removes root's
// contents if Restore still fails.
func Restore(ctx context.Context, r io.Reader, root string) (Summary, error) {
	rd, err := NewReader(r)
	if err != nil {
		return Summary{}, err
	}
	if err := store.Init(root); err != nil {
		return Summary{}, err
	}
	if have, err := store.Sessions(root, ""); err != nil || len(have) > 0 {
		if err == nil {
			err = fmt.Errorf("%s already holds sessions (%s first): a backup is restored into a new ledger", root, have[0])
		}
		return Summary{}, err
	}
	if s := rd.Header().Settings; s != nil {
		if err := store.WriteSettings(root, *s); err != nil {
			return Summary{}, err
		}
	}
	var objects *artifact.Store
	for {
		if err := ctx.Err(); err != nil {
			return Summary{}, err
		}
		p, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return rd.Summary(), nil
		}
		if err != nil {
			return Summary{}, err
		}
		body := p.Body
		if c := p.Session; c != nil {
			dir, err := store.SessionDir(root, c.Tenant, c.Session)
			if err != nil {
				return Summary{}, err
			}
			if err := store.WriteLog(dir, body, c.Bytes); err != nil {
				return Summary{}, fmt.Errorf("restore session %s: %w", c.Name(), err)
			}
			// The body reports damage at its end (the chain must end at
			// the cut): read it.
			if _, err := io.Copy(io.Discard, body); err != nil {
				os.Remove(store.LogPath(dir))
				return Summary{}, fmt.Errorf("restore session %s: %w", c.Name(), err)
			}
			continue
		}
		if objects == nil {
			if objects, err = artifact.OpenStore(store.ObjectsDir(root)); err != nil {
				return Summary{}, err
			}
		}
		d, _, err := objects.Put(ctx, body)
		if err == nil && d != p.Object.Content {
			err = fmt.Errorf("stored as %s", d) // the body refuses first; a pair with it
		}
		if err != nil {
			return Summary{}, fmt.Errorf("restore object %s: %w", p.Object.Content, err)
		}
	}
}
