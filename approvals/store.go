// Package approvals holds grants and pending approvals for protected tools:
// a grant store (per session in memory, "always" grants persisted under the
// user's config dir) and a Broker that parks protected calls until a person,
// a timeout or a policy answers them. The Broker implements engine.Approver.
package approvals

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/lloyal-ai/lloyal/regular"
)

// Grant is a persisted permission to run a protected tool without asking.
type Grant struct {
	Tool    string    `json:"tool"`
	Granted time.Time `json:"granted"`
}

type grantsFile struct {
	Version int     `json:"version"`
	Grants  []Grant `json:"grants"`
}

// Store holds grants. It is safe for concurrent use.
type Store struct {
	mu      sync.Mutex
	path    string
	session map[string]string // tool → where the grant came from
	always  map[string]Grant
	// corrupt is why the file could not be read: the store then holds no
	// persisted grants (fail-closed) and refuses to overwrite the file.
	corrupt error
	// savedOff: persisted grants do not apply in this run (--deny-protected).
	savedOff bool
}

// DefaultPath is $XDG_CONFIG_HOME/lloyal/grants.json (or the OS config dir).
func DefaultPath() (string, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		d, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("find the config dir for grants: %w", err)
		}
		dir = d
	}
	return filepath.Join(dir, "lloyal", "grants.json"), nil
}

// Open loads the grants file at path (a missing file is an empty store; an
// empty path keeps grants in memory only). A corrupt file is not an error
// here: the store treats it as empty, refuses to rewrite it, and reports it
// through Problem, so the caller can tell the user.
func Open(path string) *Store {
	s := &Store{path: path, session: map[string]string{}, always: map[string]Grant{}}
	if path == "" {
		return s
	}
	data, err := readGrants(path)
	if errors.Is(err, os.ErrNotExist) {
		return s
	}
	if err != nil {
		s.corrupt = fmt.Errorf("grants file %s %v: no persisted grant applies and it will not be rewritten; protected tools will ask every time", path, err)
		return s
	}
	var f grantsFile
	if err := json.Unmarshal(data, &f); err != nil {
		s.corrupt = fmt.Errorf("grants file %s is corrupt (%v): no persisted grant applies and it will not be rewritten; fix or delete it", path, err)
		return s
	}
	for _, g := range f.Grants {
		if g.Tool != "" {
			s.always[g.Tool] = g
		}
	}
	return s
}

// maxGrantsFile bounds what is read of a grants file (a few hundred bytes
// per grant).
const maxGrantsFile = 1 << 20

// readGrants reads a grants file that only its owner could have written,
// as ssh refuses a key file others can write: a grant is a permission, and
// whoever can write the file could grant themselves a protected tool. It
// opens a regular file only (never blocking on a FIFO or reading a device)
// and checks the opened handle, not the path.
func readGrants(path string) ([]byte, error) {
	f, err := regular.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("cannot be read (%w)", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot be read (%w)", err)
	}
	if perm := st.Mode().Perm(); perm&0o022 != 0 {
		return nil, fmt.Errorf("can be written by others (mode %04o; fix it with chmod 600 %s)", perm, path)
	}
	if uid, ok := owner(st); ok && uid != os.Getuid() {
		return nil, fmt.Errorf("belongs to user %d, not to you (%d)", uid, os.Getuid())
	}
	if err := checkFolder(filepath.Dir(path)); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxGrantsFile+1))
	if err != nil {
		return nil, fmt.Errorf("cannot be read (%w)", err)
	}
	if len(data) > maxGrantsFile {
		return nil, fmt.Errorf("is larger than %d bytes: it is not a grants file", maxGrantsFile)
	}
	return data, nil
}

// checkFolder refuses a grants folder that others may change, as ssh's
// StrictModes does: whoever can write the folder can swap the file for a
// link to another file of yours, or race the rewrite. A folder others can
// write is sound only with the sticky bit (as /tmp), which keeps them from
// renaming or deleting your files; and it must be yours or root's.
func checkFolder(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("cannot be read (its folder: %w)", err)
	}
	if perm := st.Mode(); perm.Perm()&0o022 != 0 && perm&os.ModeSticky == 0 {
		return fmt.Errorf("is in a folder others can write (%s, mode %04o; fix it with chmod go-w %s)", dir, perm.Perm(), dir)
	}
	if uid, ok := owner(st); ok && uid != os.Getuid() && uid != 0 {
		return fmt.Errorf("is in a folder that belongs to user %d, not to you (%s)", uid, dir)
	}
	return nil
}

// owner is a file's owner's uid, where the platform reports one.
func owner(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// IgnoreSaved makes persisted grants not apply in this run (they stay in
// the file): --deny-protected means no protected call runs without a
// --grant on the same command line.
func (s *Store) IgnoreSaved() {
	s.mu.Lock()
	s.savedOff = true
	s.mu.Unlock()
}

// Problem is why the grants file was ignored, or nil.
func (s *Store) Problem() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.corrupt
}

// Path is the grants file.
func (s *Store) Path() string { return s.path }

// Allowed reports whether a session or persisted grant covers tool.
func (s *Store) Allowed(tool string) bool {
	_, ok := s.Grant(tool)
	return ok
}

// Grant says whether a grant covers tool and where it came from: the
// session grant's source, or the grants file.
func (s *Store) Grant(tool string) (source string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if src, ok := s.session[tool]; ok {
		return src, true
	}
	if s.savedOff {
		return "", false
	}
	if _, ok := s.always[tool]; ok {
		return "saved grant in " + s.path, true
	}
	return "", false
}

// GrantSession allows tool until the process ends; source says who granted
// it ("--grant", "allowed for this session", …) for the trace and the screen.
func (s *Store) GrantSession(tool, source string) {
	s.mu.Lock()
	s.session[tool] = source
	s.mu.Unlock()
}

// GrantAlways allows tool now and in later runs (written to the file).
func (s *Store) GrantAlways(tool string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.session[tool] = "allowed always (saved to the grants file)"
	if s.corrupt != nil {
		return fmt.Errorf("not saved: %w", s.corrupt)
	}
	prev, had := s.always[tool]
	s.always[tool] = Grant{Tool: tool, Granted: time.Now().UTC().Truncate(time.Second)}
	if err := s.save(); err != nil {
		if had {
			s.always[tool] = prev
		} else {
			delete(s.always, tool)
		}
		return err
	}
	return nil
}

// Revoke removes tool's persisted and session grants.
func (s *Store) Revoke(tool string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.corrupt != nil {
		return s.corrupt
	}
	_, had := s.always[tool]
	delete(s.session, tool)
	if !had {
		return fmt.Errorf("no persisted grant for %q", tool)
	}
	delete(s.always, tool)
	return s.save()
}

// List returns the persisted grants, by tool name.
func (s *Store) List() []Grant {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Grant, 0, len(s.always))
	for _, g := range s.always {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tool < out[j].Tool })
	return out
}

// save writes the file atomically (temp file in the same folder, fsync,
// rename) with mode 0600. The caller holds mu.
func (s *Store) save() error {
	if s.path == "" {
		return nil
	}
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save grants: %w", err)
	}
	f := grantsFile{Version: 1}
	for _, g := range s.always {
		f.Grants = append(f.Grants, g)
	}
	sort.Slice(f.Grants, func(i, j int) bool { return f.Grants[i].Tool < f.Grants[j].Tool })
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("save grants: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".grants-*.json")
	if err != nil {
		return fmt.Errorf("save grants: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("save grants: %w", err)
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("save grants: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save grants: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save grants: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("save grants: %w", err)
	}
	return nil
}
