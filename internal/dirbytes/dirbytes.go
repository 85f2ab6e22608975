// Package dirbytes measures what a directory holds on disk, as the benches
// and tests that compare data directories count it.
package dirbytes

import (
	"io/fs"
	"path/filepath"
)

// Of is the bytes of the regular files under dir (dir's own included when
// it is a file); what cannot be read, or is removed meanwhile, counts
// nothing.
func Of(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
