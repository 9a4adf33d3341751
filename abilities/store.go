package abilities

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kaptinlin/jsonschema"
)

// Store is where abilities are installed and what the user trusts:
//
//	DataDir/NAME/bundle/…        the installed bundle, as signed
//	DataDir/NAME/install.json    its install record (Record)
//	ConfigDir/NAME.json          its settings
//	ConfigDir/trusted-keys/ID.pem the public keys the user trusts
type Store struct {
	DataDir   string // $XDG_DATA_HOME/lloyal/abilities
	ConfigDir string // $XDG_CONFIG_HOME/lloyal/abilities
}

// DefaultStore is the store under $XDG_DATA_HOME and $XDG_CONFIG_HOME
// (~/.local/share and ~/.config when unset).
func DefaultStore() (*Store, error) {
	dir := func(env string, def ...string) (string, error) {
		if d := os.Getenv(env); d != "" {
			return d, nil
		}
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the home folder for abilities (set $%s): %w", env, err)
		}
		return filepath.Join(append([]string{home}, def...)...), nil
	}
	data, err := dir("XDG_DATA_HOME", ".local", "share")
	if err != nil {
		return nil, err
	}
	cfg, err := dir("XDG_CONFIG_HOME", ".config")
	if err != nil {
		return nil, err
	}
	return &Store{DataDir: filepath.Join(data, "lloyal", "abilities"), ConfigDir: filepath.Join(cfg, "lloyal", "abilities")}, nil
}

// Record is an installed ability's install.json.
type Record struct {
	// Name and Version are the manifest's.
	Name    string `json:"name"`
	Version string `json:"version"`
	// Key is the id of the trusted key that signed it; "" when it was
	// installed with --allow-unsigned, and Unverified says why it did not
	// verify.
	Key string `json:"key,omitempty"`
	// Unverified is why the bundle did not verify, when it was installed
	// with --allow-unsigned; "" for a verified one.
	Unverified string `json:"unverified,omitempty"`
	// Enabled: a run without --ability loads it.
	Enabled bool `json:"enabled"`
	// Source is the folder or .tar.gz it was installed from.
	Source string `json:"source"`
	// Installed is when, in UTC.
	Installed time.Time `json:"installed"`
}

// Signer is how the record reads in a list or a trace: the key id, or
// "unsigned".
func (r Record) Signer() string {
	if r.Key == "" {
		return "unsigned"
	}
	return r.Key
}

func (s *Store) trustDir() string { return filepath.Join(s.ConfigDir, "trusted-keys") }

// Trusted is every key the user trusts, by id.
func (s *Store) Trusted() (map[string]ed25519.PublicKey, error) {
	out := map[string]ed25519.PublicKey{}
	ents, err := os.ReadDir(s.trustDir())
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the trusted keys: %w", err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".pem") {
			continue
		}
		pub, err := ReadPublicKey(filepath.Join(s.trustDir(), e.Name()))
		if err != nil {
			return nil, fmt.Errorf("trusted key %s: %w (remove the file)", e.Name(), err)
		}
		out[KeyID(pub)] = pub
	}
	return out, nil
}

// Trust adds a public key file to the trusted keys and returns its id.
func (s *Store) Trust(keyFile string) (string, error) {
	pub, err := ReadPublicKey(keyFile)
	if err != nil {
		return "", err
	}
	id := KeyID(pub)
	p := filepath.Join(s.trustDir(), id+".pem")
	err = os.MkdirAll(s.trustDir(), 0o755)
	if err == nil {
		err = os.WriteFile(p, EncodePublicKey(pub), 0o644)
	}
	if err != nil {
		return "", fmt.Errorf("trust key %s: write %s: %w (check that the folder is writable)", id, p, err)
	}
	return id, nil
}

// Install verifies the bundle at src and installs it (replacing an
// installed ability of the same name), enabled. A bundle that does not
// verify is refused with the reason, and nothing is written, unless
// allowUnsigned: then it is installed and the record keeps the reason.
func (s *Store) Install(src string, allowUnsigned bool) (*Record, error) {
	b, err := ReadBundle(src)
	if err != nil {
		return nil, err
	}
	trusted, err := s.Trusted()
	if err != nil {
		return nil, err
	}
	rec := &Record{Name: b.Manifest.Name, Version: b.Manifest.Version, Enabled: true, Source: src, Installed: time.Now().UTC()}
	rec.Key, err = b.Verify(trusted)
	if err != nil {
		if !allowUnsigned {
			return nil, fmt.Errorf("refused to install %s: %w", src, err)
		}
		rec.Unverified = err.Error()
	}
	// Every failure from here is the file system's: name the folder.
	failed := func(err error) error {
		return fmt.Errorf("install %s into %s: %w (check that the folder is writable and the disk has room)", rec.Name, s.DataDir, err)
	}
	if err := os.MkdirAll(s.DataDir, 0o755); err != nil {
		return nil, failed(err)
	}
	// Write it whole beside the old one, then swap: a failed install
	// leaves the old ability as it was.
	tmp, err := os.MkdirTemp(s.DataDir, ".install-"+rec.Name+"-")
	if err != nil {
		return nil, failed(err)
	}
	defer os.RemoveAll(tmp)
	for name, data := range b.Files {
		p := filepath.Join(tmp, "bundle", filepath.FromSlash(name))
		mode := os.FileMode(0o644)
		if b.Exec[name] {
			mode = 0o755
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, failed(err)
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			return nil, failed(err)
		}
	}
	if err := writeJSON(filepath.Join(tmp, "install.json"), rec); err != nil {
		return nil, failed(err)
	}
	dst := filepath.Join(s.DataDir, rec.Name)
	old := dst + ".old"
	_ = os.RemoveAll(old)
	if err := os.Rename(dst, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, failed(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.Rename(old, dst)
		return nil, failed(err)
	}
	_ = os.RemoveAll(old)
	return rec, nil
}

func writeJSON(p string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(p, append(b, '\n'), 0o644)
}

func (s *Store) record(name string) (*Record, error) {
	if !nameRE.MatchString(name) {
		return nil, fmt.Errorf("%q is not an ability name (lowercase letters, digits and '-'): see `lloyal ability list`", name)
	}
	p := filepath.Join(s.DataDir, name, "install.json")
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no ability %q is installed: see `lloyal ability list`", name)
	}
	if err != nil {
		return nil, fmt.Errorf("ability %s: read %s: %w (check its permissions, or install it again)", name, p, err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("ability %s: its install record is damaged (%v): install it again", name, err)
	}
	return &r, nil
}

// List is every installed ability, by name.
func (s *Store) List() ([]Record, error) {
	ents, err := os.ReadDir(s.DataDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the installed abilities: read %s: %w (check its permissions)", s.DataDir, err)
	}
	var out []Record
	for _, e := range ents {
		if !e.IsDir() || !nameRE.MatchString(e.Name()) {
			continue
		}
		r, err := s.record(e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	return out, nil
}

// SetEnabled enables or disables an installed ability (a run without
// --ability loads the enabled ones).
func (s *Store) SetEnabled(name string, on bool) error {
	r, err := s.record(name)
	if err != nil {
		return err
	}
	r.Enabled = on
	return writeJSON(filepath.Join(s.DataDir, name, "install.json"), r)
}

// Remove uninstalls an ability (its settings stay, for a reinstall).
func (s *Store) Remove(name string) error {
	if _, err := s.record(name); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(s.DataDir, name)); err != nil {
		return fmt.Errorf("remove ability %s: %w (check the permissions of %s)", name, err, s.DataDir)
	}
	return nil
}

// Installed is an installed ability, loaded for a run.
type Installed struct {
	Record
	// Manifest is the installed bundle's ability.json, parsed.
	Manifest *Manifest
	// Dir is the installed bundle's folder.
	Dir string
	// Instructions is the Markdown given to the agents that use it, its
	// role markers neutralised (Neutralise).
	Instructions string
	// SettingsPath is the user's settings file for it.
	SettingsPath string
	schema       *jsonschema.Schema
}

// Load loads installed abilities for a run: those named, or every enabled
// one when names is empty. A signed ability is verified again (a file
// changed since it was installed is refused, naming it).
func (s *Store) Load(names []string) ([]*Installed, error) {
	if len(names) == 0 {
		all, err := s.List()
		if err != nil {
			return nil, err
		}
		for _, r := range all {
			if r.Enabled {
				names = append(names, r.Name)
			}
		}
	}
	trusted, err := s.Trusted()
	if err != nil {
		return nil, err
	}
	var out []*Installed
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		r, err := s.record(n)
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(s.DataDir, n, "bundle")
		b, err := ReadBundle(dir)
		if err != nil {
			return nil, fmt.Errorf("ability %s: %w (install it again)", n, err)
		}
		if r.Key != "" {
			if _, err := b.Verify(trusted); err != nil {
				return nil, fmt.Errorf("ability %s no longer verifies: %w", n, err)
			}
		}
		in := &Installed{Record: *r, Manifest: b.Manifest, Dir: dir, SettingsPath: filepath.Join(s.ConfigDir, n+".json")}
		if f := b.Manifest.Instructions; f != "" {
			// Written into the agents' system prompt: no role marker in
			// it may speak as another party.
			in.Instructions = Neutralise(strings.TrimSpace(string(b.Files[filepath.ToSlash(filepath.Clean(f))])))
		}
		if f := b.Manifest.Settings; f != "" {
			in.schema, err = compileSchema(b.Files[filepath.ToSlash(filepath.Clean(f))])
			if err != nil {
				return nil, fmt.Errorf("ability %s: its settings schema %s is not a valid JSON Schema: %w", n, f, err)
			}
		}
		if _, err := in.Settings(); err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

// Settings reads the user's settings for the ability and checks them
// against its schema ({} when the file does not exist). Tools call it at
// each call, so an edit takes effect on the next one.
func (in *Installed) Settings() (map[string]any, error) {
	v := map[string]any{}
	b, err := os.ReadFile(in.SettingsPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("ability %s: read its settings: %w", in.Name, err)
	default:
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("ability %s: its settings %s are not a JSON object: %v", in.Name, in.SettingsPath, err)
		}
	}
	if in.schema == nil {
		return v, nil
	}
	if res := in.schema.Validate(v); !res.IsValid() {
		var problems []string
		for field, e := range res.Errors {
			problems = append(problems, fmt.Sprintf("%s: %s", field, e.Error()))
		}
		for _, d := range res.ToList(true).Details {
			for kw, msg := range d.Errors {
				problems = append(problems, fmt.Sprintf("%s %s: %s", strings.TrimPrefix(d.InstanceLocation, "/"), kw, msg))
			}
		}
		return nil, fmt.Errorf("ability %s: the settings in %s do not fit its schema (%s): edit the file", in.Name, in.SettingsPath, strings.Join(dedupe(problems), "; "))
	}
	return v, nil
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
