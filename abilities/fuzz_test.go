package abilities

import "testing"

// ParseManifest takes any bytes: it accepts a manifest only when its name
// can prefix tool names and it says how to reach exactly one server, and
// it never panics.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"name":"demo","version":"1","useWhen":"counting","server":{"command":"./server"}}`))
	f.Add([]byte(`{"name":"web","version":"1","useWhen":"x","server":{"url":"https://h/mcp"},"timeout":"5s","restarts":3,"protect":["*"]}`))
	f.Add([]byte(`{"name":"","server":{}}`))
	f.Add([]byte(`[]`))
	files := map[string][]byte{"ability.json": nil, "server": nil, "INSTRUCTIONS.md": nil}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data, files)
		if err != nil {
			return
		}
		if !nameRE.MatchString(m.Name) || (m.Server.Command == "") == (m.Server.URL == "") || m.MaxRestarts() < 0 {
			t.Fatalf("accepted %+v", m)
		}
		if d, err := m.CallTimeout(); err != nil || d <= 0 {
			t.Fatalf("accepted timeout %q", m.Timeout)
		}
	})
}
