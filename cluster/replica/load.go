package replica

import (
	"io/fs"
	"path/filepath"

	"tally/store"
)

// GroupBytes is a data group's size on this node's disk: the files of the
// sessions it holds. It opens no ledger and takes no lock the apply path
// holds, so the placement driver reads it on any goroutine.
func (m *SM) GroupBytes(group uint64) (int64, error) {
	sessions, err := m.heldSessions(group)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, se := range sessions {
		dir, err := store.SessionDir(m.dataSM.cfg.Root, se.Tenant, se.Name)
		if err != nil {
			continue
		}
		err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil // a file removed meanwhile is not counted
			}
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	return total, nil
}
