//go:build linux

package artifact

import (
	"os"
	"syscall"
)

// syncFileRangeWrite is SYNC_FILE_RANGE_WRITE: start writeback of dirty pages
// in the range without waiting for it.
const syncFileRangeWrite = 0x2

// startWriteback asks the kernel to begin writing [off, off+n) of f to disk
// now, so the final fsync waits for less. A failure is ignored: the fsync
// that follows is the durability point and reports any real error.
func startWriteback(f *os.File, off, n int64) {
	_ = syscall.SyncFileRange(int(f.Fd()), off, n, syncFileRangeWrite)
}
