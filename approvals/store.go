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

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/internal/regular"
)

// Grant is a persisted permission to run a protected tool without asking:
// the tool's name and origin (engine.ToolSpec.Origin), its identity.
type Grant struct {
	Tool string `json:"tool"`
	// Origin is where the tool comes from; "" on a grant an older lloyal
	// wrote, by name alone, which allows built-in tools only.
	Origin  string    `json:"origin,omitempty"`
	Granted time.Time `json:"granted"`
}

// Legacy reports whether g is a name-only grant from an older lloyal.
func (g Grant) Legacy() bool { return g.Origin == "" }

// fileVersion is the grants file's format: version 2 keeps grants bound to
// an identity under "bound", where an older lloyal, which reads "grants"
// by name alone, never sees them (it would let every tool of the name run).
const fileVersion = 2

type grantsFile struct {
	Version int `json:"version"`
	// Grants are name-only grants (an older lloyal's).
	Grants []Grant `json:"grants,omitempty"`
	// Bound are grants bound to a tool's identity.
	Bound []Grant `json:"bound,omitempty"`
}

// id is a tool's identity: its name and where it comes from.
type id struct{ tool, origin string }

// originOf is origin, engine.OriginBuiltin when it is "".
func originOf(origin string) string {
	if origin == "" {
		return engine.OriginBuiltin
	}
	return origin
}

// Store holds grants. It is safe for concurrent use.
type Store struct {
	mu   sync.Mutex
	path string
	// session are this run's grants of one tool (an answer "for the
	// session"), byName this run's grants by name (--grant NAME: the user
	// named it on the command line), each with where it came from.
	session map[id]string
	byName  map[string]string
	always  map[id]Grant
	// legacy are the file's name-only grants: they allow built-in tools
	// of their name, never a harness's or an ability's.
	legacy map[string]Grant
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
	s := &Store{path: path, session: map[id]string{}, byName: map[string]string{}, always: map[id]Grant{}, legacy: map[string]Grant{}}
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
	for _, g := range append(f.Grants, f.Bound...) {
		switch {
		case g.Tool == "":
		case g.Legacy():
			s.legacy[g.Tool] = g
		default:
			s.always[id{g.Tool, g.Origin}] = g
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

// Allowed reports whether a session or persisted grant covers the tool
// named tool that comes from origin (engine.ToolSpec.Origin).
func (s *Store) Allowed(tool, origin string) bool {
	_, ok := s.Grant(tool, origin)
	return ok
}

// Grant says whether a grant covers the tool named tool that comes from
// origin, and where the grant came from: the session grant's source, or
// the grants file. A grant is for one tool: another of the same name (a
// harness's own save_report, an ability installed under another's name,
// a definition changed since) is not covered, except by --grant NAME. A
// name-only grant an older lloyal saved covers a built-in tool only.
func (s *Store) Grant(tool, origin string) (source string, ok bool) {
	origin = originOf(origin)
	s.mu.Lock()
	defer s.mu.Unlock()
	if src, ok := s.session[id{tool, origin}]; ok {
		return src, true
	}
	if src, ok := s.byName[tool]; ok {
		return src, true
	}
	if s.savedOff {
		return "", false
	}
	if _, ok := s.always[id{tool, origin}]; ok {
		return "saved grant in " + s.path, true
	}
	if _, ok := s.legacy[tool]; ok && origin == engine.OriginBuiltin {
		return "saved name-only grant in " + s.path + " (from an older lloyal: it allows built-in tools only)", true
	}
	return "", false
}

// LegacyFor is the name-only grant (from an older lloyal) for a tool named
// tool, if the file holds one and saved grants apply in this run: it
// covers the tool only if the tool is built-in.
func (s *Store) LegacyFor(tool string) (Grant, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.legacy[tool]
	return g, ok && !s.savedOff
}

// GrantName allows every tool named tool until the process ends: the user
// named it on the command line (--grant NAME). source says who granted it,
// for the trace and the screen.
func (s *Store) GrantName(tool, source string) {
	s.mu.Lock()
	s.byName[tool] = source
	s.mu.Unlock()
}

// GrantSession allows the tool named tool that comes from origin until the
// process ends; source says who granted it ("allowed for this session",
// …) for the trace and the screen.
func (s *Store) GrantSession(tool, origin, source string) {
	s.mu.Lock()
	s.session[id{tool, originOf(origin)}] = source
	s.mu.Unlock()
}

// GrantAlways allows the tool named tool that comes from origin now and in
// later runs (written to the file, with its origin). A name-only grant of
// a built-in tool of that name gives way to it.
func (s *Store) GrantAlways(tool, origin string) error {
	origin = originOf(origin)
	k := id{tool, origin}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.session[k] = "allowed always (saved to the grants file)"
	if s.corrupt != nil {
		return fmt.Errorf("not saved: %w", s.corrupt)
	}
	prev, had := s.always[k]
	old, hadOld := s.legacy[tool]
	s.always[k] = Grant{Tool: tool, Origin: origin, Granted: time.Now().UTC().Truncate(time.Second)}
	if origin == engine.OriginBuiltin {
		delete(s.legacy, tool)
	}
	if err := s.save(); err != nil {
		if had {
			s.always[k] = prev
		} else {
			delete(s.always, k)
		}
		if hadOld {
			s.legacy[tool] = old
		}
		return err
	}
	return nil
}

// Revoke removes every persisted and session grant of a tool named tool,
// whatever its origin, and says how many persisted grants it removed.
func (s *Store) Revoke(tool string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.corrupt != nil {
		return 0, s.corrupt
	}
	for k := range s.session {
		if k.tool == tool {
			delete(s.session, k)
		}
	}
	delete(s.byName, tool)
	n := 0
	if _, ok := s.legacy[tool]; ok {
		delete(s.legacy, tool)
		n++
	}
	for k := range s.always {
		if k.tool == tool {
			delete(s.always, k)
			n++
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("no persisted grant for %q: lloyal grants list shows them", tool)
	}
	return n, s.save()
}

// List returns the persisted grants, by tool name, then origin (a
// name-only grant first).
func (s *Store) List() []Grant {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grants()
}

// grants are the persisted grants, sorted. The caller holds mu.
func (s *Store) grants() []Grant {
	out := make([]Grant, 0, len(s.always)+len(s.legacy))
	for _, g := range s.legacy {
		out = append(out, g)
	}
	for _, g := range s.always {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tool != out[j].Tool {
			return out[i].Tool < out[j].Tool
		}
		return out[i].Origin < out[j].Origin
	})
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
	f := grantsFile{Version: fileVersion}
	for _, g := range s.grants() {
		if g.Legacy() {
			f.Grants = append(f.Grants, g)
		} else {
			f.Bound = append(f.Bound, g)
		}
	}
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
