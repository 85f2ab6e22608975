package raftlog

import (
	"errors"
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// ErrInjected is the error a FaultFS returns for an injected fault.
var ErrInjected = errors.New("raftlog: injected disk fault")

// FaultFS wraps a file system and fails writes or syncs of the write-ahead
// log on demand, the way a dying disk fails a commit. Faults are confined to
// the log because that is where a commit meets the disk; pebble treats
// errors in its own background work (flushes, manifest) as fatal to the
// process, which a test cannot recover from.
type FaultFS struct {
	*errorfs.FS
	failWrites atomic.Bool
	failSyncs  atomic.Bool
	injected   atomic.Int64
}

// NewFaultFS wraps fs.
func NewFaultFS(fs vfs.FS) *FaultFS {
	f := &FaultFS{}
	f.FS = errorfs.Wrap(fs, errorfs.InjectorFunc(f.maybeError))
	return f
}

// FailWrites makes every later write to the log fail (or stop failing).
func (f *FaultFS) FailWrites(on bool) { f.failWrites.Store(on) }

// FailSyncs makes every later fsync of the log fail (or stop failing).
func (f *FaultFS) FailSyncs(on bool) { f.failSyncs.Store(on) }

// Injected counts the faults returned so far.
func (f *FaultFS) Injected() int64 { return f.injected.Load() }

func (f *FaultFS) maybeError(op errorfs.Op) error {
	if !strings.HasSuffix(op.Path, ".log") {
		return nil
	}
	switch op.Kind {
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt:
		if f.failWrites.Load() {
			f.injected.Add(1)
			return ErrInjected
		}
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		if f.failSyncs.Load() {
			f.injected.Add(1)
			return ErrInjected
		}
	}
	return nil
}
