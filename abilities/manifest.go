// Package abilities holds lloyal's abilities: tool bundles a user installs.
// An ability is a folder (or a .tar.gz of one) with a manifest,
// ability.json, that names it, says when to use it, gives its agents
// instructions and a settings schema, and says how to reach its tools: an
// MCP server started over stdio or a streamable-HTTP MCP endpoint. A bundle
// is signed (Ed25519 over the SHA-512 of every file, the manifest included)
// and installed only when a key the user trusts signed it. Its MCP tools
// become engine tools (Server.Tools).
package abilities

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/lloyal-ai/lloyal/trace"
)

// ManifestFile is the manifest's name at the bundle's root.
const ManifestFile = "ability.json"

// Manifest is ability.json.
type Manifest struct {
	// Name is lowercase letters, digits and '-', starting with a letter; it
	// prefixes the ability's tools (NAME_TOOL).
	Name    string `json:"name"`
	Version string `json:"version"`
	// UseWhen is one line for the spine's catalogue: when an agent should
	// reach for this ability. It is written into every agent's system
	// prompt, so it may hold no line break, code fence or role marker
	// (checkUseWhen).
	UseWhen string `json:"useWhen"`
	// Instructions is a Markdown file of the bundle given to the agents
	// that use the ability (optional).
	Instructions string `json:"instructions,omitempty"`
	// Settings is a JSON Schema file of the bundle that the user's settings
	// must satisfy (optional: no settings).
	Settings string `json:"settings,omitempty"`
	// Server is how to reach the tools.
	Server ServerSpec `json:"server"`
	// Protect names tools that need a person's approval even though the
	// server marks them read-only ("*": all of them). It can only add
	// protection: a tool the server marks destructive, or does not mark
	// read-only, is protected whatever the manifest says.
	Protect []string `json:"protect,omitempty"`
	// Timeout is how long a call may wait without a word from its server
	// (a Go duration, e.g. "30s"; default 60s): past it the call ends and
	// the server is stopped. A progress notification is a word; a call
	// that keeps reporting progress ends at ten times the timeout.
	Timeout string `json:"timeout,omitempty"`
	// Restarts is how many times a server that crashed or hung is started
	// again in one run (default 2).
	Restarts *int `json:"restarts,omitempty"`
}

// ServerSpec is how to reach an ability's MCP server: Command (stdio) or
// URL (streamable HTTP), exactly one.
type ServerSpec struct {
	// Command is run with Args in the installed bundle's folder; a command
	// starting with "./" is a file of the bundle, any other is looked up on
	// PATH (e.g. "npx").
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// Defaults for a manifest that says nothing.
const (
	DefaultTimeout  = 60 * time.Second
	DefaultRestarts = 2
)

// ParseManifest reads and checks ability.json; files lists the bundle's
// files, which the manifest's Instructions and Settings must name.
func ParseManifest(data []byte, files map[string][]byte) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s is not a valid manifest: %w (docs/abilities.md lists its fields)", ManifestFile, err)
	}
	bad := func(format string, args ...any) (*Manifest, error) {
		return nil, fmt.Errorf("%s: "+format, append([]any{ManifestFile}, args...)...)
	}
	if !nameRE.MatchString(m.Name) {
		return bad("name %q: use 1 to 32 lowercase letters, digits or '-', starting with a letter (it prefixes the tools' names)", m.Name)
	}
	if strings.TrimSpace(m.Version) == "" {
		return bad("no version: give one (e.g. \"1.0.0\")")
	}
	if !trace.PlainVersion(m.Version) {
		// The version is shown beside the signer on every approval.
		return bad("version %q: use 1 to 64 letters, digits, '.', '+', '_' or '-' (e.g. \"1.0.0\")", m.Version)
	}
	if err := checkUseWhen(m.UseWhen); err != nil {
		return bad("%v", err)
	}
	for field, f := range map[string]string{"instructions": m.Instructions, "settings": m.Settings} {
		if f == "" {
			continue
		}
		if _, ok := files[path.Clean(f)]; !ok {
			return bad("%s names %q, which is not a file of the bundle", field, f)
		}
	}
	s := m.Server
	switch {
	case s.Command != "" && s.URL != "":
		return bad("server has both command and url: give one (command for stdio, url for streamable HTTP)")
	case s.Command == "" && s.URL == "":
		return bad("server has neither command nor url: give one (command for stdio, url for streamable HTTP)")
	case s.URL != "":
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("server url %q: give an http:// or https:// address", s.URL)
		}
	case strings.HasPrefix(s.Command, "./"):
		if _, ok := files[path.Clean(s.Command)]; !ok {
			return bad("server command %q is not a file of the bundle", s.Command)
		}
	}
	if _, err := m.CallTimeout(); err != nil {
		return nil, err
	}
	if m.Restarts != nil && (*m.Restarts < 0 || *m.Restarts > 100) {
		return bad("restarts %d: use 0 to 100", *m.Restarts)
	}
	return &m, nil
}

// CallTimeout is how long a call may wait without a word from its server.
func (m *Manifest) CallTimeout() (time.Duration, error) {
	if m.Timeout == "" {
		return DefaultTimeout, nil
	}
	d, err := time.ParseDuration(m.Timeout)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: timeout %q: give a positive Go duration (e.g. \"30s\")", ManifestFile, m.Timeout)
	}
	return d, nil
}

// MaxRestarts is how many times a failed server is started again.
func (m *Manifest) MaxRestarts() int {
	if m.Restarts == nil {
		return DefaultRestarts
	}
	return *m.Restarts
}

// protects says whether the manifest asks for tool to be protected.
func (m *Manifest) protects(tool string) bool {
	for _, p := range m.Protect {
		if p == "*" || p == tool {
			return true
		}
	}
	return false
}
