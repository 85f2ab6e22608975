package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"tally/sessionname"
)

// DirName is the ledger directory found by walking up, like .git.
const DirName = ".tally"

// markerName marks a directory as a tally ledger and records its format.
const markerName = "tally.json"

// ObjectsDir is where a ledger keeps artifact bytes, shared by its sessions
// (content-addressed, so sessions share copies).
func ObjectsDir(root string) string { return filepath.Join(root, "objects") }

// SessionDir is where a session's log lives inside a ledger directory.
func SessionDir(root, tenant, session string) (string, error) {
	if err := sessionname.Check("tenant", tenant); err != nil {
		return "", err
	}
	if err := sessionname.Check("session", session); err != nil {
		return "", err
	}
	return filepath.Join(root, "sessions", tenant, session), nil
}

// LogPath is the path of the log of the session in dir.
func LogPath(dir string) string { return filepath.Join(dir, logName) }

// HasLog reports whether the session in dir holds a log with something in
// it: a session exists from its first record (an empty log is what a read
// opened and never wrote).
func HasLog(dir string) bool {
	fi, err := os.Stat(LogPath(dir))
	return err == nil && fi.Size() > 0
}

// WriteLog writes a session's whole log, n bytes read from r, into the
// session directory dir (made if need be), durably: what a snapshot or a
// restored backup installs. It replaces a log already there. It does not
// read the lines: the ledger verifies them when it opens the log, and a
// caller that can verifies them as r is read (r's error is WriteLog's).
func WriteLog(dir string, r io.Reader, n int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write log: %w", err)
	}
	f, err := os.Create(LogPath(dir))
	if err != nil {
		return fmt.Errorf("write log: %w", err)
	}
	written, err := io.Copy(f, io.LimitReader(r, n))
	if err == nil && written != n {
		err = fmt.Errorf("%d bytes of a %d-byte log: the source was cut short", written, n)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write log %s: %w", LogPath(dir), err)
	}
	// The file's entry, and the session's and tenant's directories if they
	// are new.
	for d, i := dir, 0; i < 3; d, i = filepath.Dir(d), i+1 {
		if err := SyncDir(d); err != nil {
			return fmt.Errorf("write log: sync %s: %w", d, err)
		}
	}
	return nil
}

// Init makes dir a ledger directory. It is idempotent.
func Init(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o755); err != nil {
		return fmt.Errorf("init ledger: %w", err)
	}
	marker := filepath.Join(dir, markerName)
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	body := fmt.Sprintf("{\"format\":%d}\n", FormatVersion)
	if err := os.WriteFile(marker, []byte(body), 0o644); err != nil {
		return fmt.Errorf("init ledger: %w", err)
	}
	return SyncDir(dir)
}

// IsLedger reports whether dir holds a ledger.
func IsLedger(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, markerName))
	return err == nil
}

// ErrNoLedger is returned by Find when no ledger directory is found.
var ErrNoLedger = errors.New("no ledger: run `tally init`, pass --dir, or set TALLY_DIR")

// Find walks up from start to the nearest directory holding a .tally ledger.
func Find(start string) (string, error) {
	dir, err := filepath.Abs(start)
	if err != nil {
		return "", err
	}
	for {
		cand := filepath.Join(dir, DirName)
		if IsLedger(cand) {
			return cand, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoLedger
		}
		dir = parent
	}
}

// Session names one session of a ledger directory.
type Session struct{ Tenant, Name string }

func (s Session) String() string { return s.Tenant + "/" + s.Name }

// Sessions lists the sessions of the ledger at root that have a log,
// ordered by tenant then name; with tenant set, only that tenant's.
// Directories that are not valid names or hold no log are not sessions.
func Sessions(root, tenant string) ([]Session, error) {
	base := filepath.Join(root, "sessions")
	tenants := []string{tenant}
	if tenant == "" {
		ents, err := os.ReadDir(base)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		tenants = tenants[:0]
		for _, e := range ents {
			tenants = append(tenants, e.Name())
		}
	}
	var out []Session
	for _, t := range tenants {
		if sessionname.Check("tenant", t) != nil {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(base, t))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		for _, e := range ents { // os.ReadDir sorts by name
			if !e.IsDir() || sessionname.Check("session", e.Name()) != nil {
				continue
			}
			if _, err := os.Stat(filepath.Join(base, t, e.Name(), logName)); err == nil {
				out = append(out, Session{Tenant: t, Name: e.Name()})
			}
		}
	}
	return out, nil
}

// Settings are a ledger directory's own limits, kept in its tally.json
// beside the format, so every process that opens the ledger (the CLI,
// tally watch, tally serve) applies the same ones. Zero values mean the
// defaults.
type Settings struct {
	// LineageMax bounds an expectation's lineage: past it only a person
	// extends.
	LineageMax int `json:"lineage_max,omitempty"`
	// RequestHistory is how long a request id's answer is retained, as a
	// Go duration ("24h"); a retry older than that is refused.
	RequestHistory string `json:"request_history,omitempty"`
}

// ReadSettings reads the settings of the ledger at root. Members it does
// not know are ignored (a later version may add some); a member of the
// wrong type is refused by name.
func ReadSettings(root string) (Settings, error) {
	var s Settings
	b, err := os.ReadFile(filepath.Join(root, markerName))
	if err != nil {
		return s, fmt.Errorf("ledger settings: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return s, fmt.Errorf("ledger settings %s: %s: must be a JSON %s", filepath.Join(root, markerName), te.Field, te.Type.Kind())
		}
		return s, fmt.Errorf("ledger settings %s: %w", filepath.Join(root, markerName), err)
	}
	return s, nil
}

// WriteSettings records s as the settings of the ledger at root (a ledger
// restored from a backup takes its source's), replacing its tally.json
// whole.
func WriteSettings(root string, s Settings) error {
	b, err := json.Marshal(struct {
		Format int `json:"format"`
		Settings
	}{FormatVersion, s})
	if err != nil {
		return fmt.Errorf("ledger settings: %w", err)
	}
	path := filepath.Join(root, markerName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("ledger settings: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("ledger settings: %w", err)
	}
	return SyncDir(root)
}
