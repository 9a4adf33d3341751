package abilities

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeBundle writes a small stdio ability into dir.
func writeBundle(t *testing.T, dir, name string) {
	t.Helper()
	files := map[string]string{
		"ability.json":         `{"name":"` + name + `","version":"1.2.0","useWhen":"when you must count or delete items","instructions":"INSTRUCTIONS.md","settings":"settings.schema.json","server":{"command":"./server","args":["--tools","count"]}}`,
		"INSTRUCTIONS.md":      "Count before you delete.\n",
		"settings.schema.json": `{"type":"object","properties":{"greeting":{"type":"string","maxLength":10}}}`,
		"server":               "#!/bin/sh\nexit 0\n",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// signBundle signs the bundle in dir with the key at keyPath.
func signBundle(t *testing.T, dir, keyPath string) {
	t.Helper()
	key, err := ReadPrivateKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ReadBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := b.Sign(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SignatureFile), sig, 0o644); err != nil {
		t.Fatal(err)
	}
}

func newStore(t *testing.T) *Store {
	root := t.TempDir()
	return &Store{DataDir: filepath.Join(root, "data"), ConfigDir: filepath.Join(root, "config")}
}

// installed installs the ability folder src, unsigned, into a fresh store
// and loads it (names as Store.Load takes them; none: every enabled one).
func installed(t *testing.T, src string, names ...string) *Installed {
	t.Helper()
	s := newStore(t)
	if _, err := s.Install(src, true); err != nil {
		t.Fatal(err)
	}
	l, err := s.Load(names)
	if err != nil {
		t.Fatal(err)
	}
	return l[0]
}

func TestInstallVerifiesTheSignature(t *testing.T) {
	keys := t.TempDir()
	mine, other := filepath.Join(keys, "mine"), filepath.Join(keys, "other")
	if _, err := GenerateKey(mine); err != nil {
		t.Fatal(err)
	}
	if _, err := GenerateKey(other); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		tamper func(t *testing.T, dir string)
		reason string // "" installs
		words  string // the message names the reason
	}{
		{"valid", func(*testing.T, string) {}, "", ""},
		{"changed file", func(t *testing.T, dir string) {
			_ = os.WriteFile(filepath.Join(dir, "INSTRUCTIONS.md"), []byte("Delete everything.\n"), 0o644)
		}, "changed-file", "INSTRUCTIONS.md changed after the bundle was signed"},
		{"changed manifest", func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, "ability.json"))
			_ = os.WriteFile(filepath.Join(dir, "ability.json"), []byte(strings.Replace(string(b), `"count"`, `"delete_item"`, 1)), 0o644)
		}, "changed-manifest", "the manifest ability.json changed"},
		{"added file", func(t *testing.T, dir string) {
			_ = os.WriteFile(filepath.Join(dir, "extra.sh"), []byte("rm -rf ~"), 0o755)
		}, "added-file", "extra.sh was added"},
		{"removed file", func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, "ability.json"))
			_ = os.WriteFile(filepath.Join(dir, "ability.json"), []byte(strings.Replace(string(b), `"settings":"settings.schema.json",`, ``, 1)), 0o644)
			signBundle(t, dir, mine)
			_ = os.Remove(filepath.Join(dir, "settings.schema.json"))
		}, "missing-file", "settings.schema.json was signed but is missing"},
		{"untrusted key", func(t *testing.T, dir string) { signBundle(t, dir, other) }, "untrusted-key", "which you do not trust"},
		{"missing signature", func(t *testing.T, dir string) { _ = os.Remove(filepath.Join(dir, SignatureFile)) }, "unsigned", "the bundle is not signed"},
		{"forged signature", func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, SignatureFile))
			_ = os.WriteFile(filepath.Join(dir, SignatureFile), []byte(strings.Replace(string(b), `"files": {`, `"files": {"evil": "`+strings.Repeat("0", 128)+`",`, 1)), 0o644)
		}, "bad-signature", "does not match its list of files"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			if _, err := s.Trust(mine + ".pub"); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			writeBundle(t, dir, "demo")
			signBundle(t, dir, mine)
			c.tamper(t, dir)
			rec, err := s.Install(dir, false)
			if c.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				if rec.Key == "" || rec.Unverified != "" || !rec.Enabled {
					t.Fatalf("record %+v", rec)
				}
				if _, err := os.Stat(filepath.Join(s.DataDir, "demo", "bundle", "ability.json")); err != nil {
					t.Fatal(err)
				}
				return
			}
			var ve *VerifyError
			if !errors.As(err, &ve) || ve.Reason != c.reason || !strings.Contains(err.Error(), c.words) {
				t.Fatalf("got %v, want a %s refusal saying %q", err, c.reason, c.words)
			}
			if ents, _ := os.ReadDir(s.DataDir); len(ents) != 0 {
				t.Fatalf("a refused install wrote %v", ents)
			}
			// --allow-unsigned installs it, keeping the reason.
			rec, err = s.Install(dir, true)
			if err != nil || rec.Key != "" || !strings.Contains(rec.Unverified, c.words) {
				t.Fatalf("--allow-unsigned: %+v %v", rec, err)
			}
		})
	}
}

func TestStoreLifecycle(t *testing.T) {
	s := newStore(t)
	keys := t.TempDir()
	if _, err := GenerateKey(filepath.Join(keys, "k")); err != nil {
		t.Fatal(err)
	}
	id, err := s.Trust(filepath.Join(keys, "k.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Trust(filepath.Join(keys, "k")); err == nil {
		t.Fatal("a private key file was trusted")
	}
	// A .tar.gz of the folder installs like the folder.
	src := filepath.Join(t.TempDir(), "demo")
	_ = os.Mkdir(src, 0o755)
	writeBundle(t, src, "demo")
	signBundle(t, src, filepath.Join(keys, "k"))
	tgz := filepath.Join(t.TempDir(), "demo.tar.gz")
	tarGz(t, filepath.Dir(src), "demo", tgz)
	rec, err := s.Install(tgz, false)
	if err != nil || rec.Key != id {
		t.Fatalf("%+v %v", rec, err)
	}
	if fi, err := os.Stat(filepath.Join(s.DataDir, "demo", "bundle", "server")); err != nil || fi.Mode()&0o100 == 0 {
		t.Fatalf("the server lost its exec bit: %v %v", fi, err)
	}
	loaded, err := s.Load(nil)
	if err != nil || len(loaded) != 1 || loaded[0].Instructions != "Count before you delete." {
		t.Fatalf("%+v %v", loaded, err)
	}
	// Settings are checked against the schema, at each read.
	if err := os.MkdirAll(s.ConfigDir, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(loaded[0].SettingsPath, []byte(`{"greeting":"far too long a greeting"}`), 0o644)
	if _, err := loaded[0].Settings(); err == nil || !strings.Contains(err.Error(), "greeting") {
		t.Fatalf("bad settings: %v", err)
	}
	if _, err := s.Load(nil); err == nil {
		t.Fatal("a run loaded an ability with bad settings")
	}
	_ = os.WriteFile(loaded[0].SettingsPath, []byte(`{"greeting":"hi"}`), 0o644)
	if v, err := loaded[0].Settings(); err != nil || v["greeting"] != "hi" {
		t.Fatalf("%v %v", v, err)
	}
	// Disabled abilities are not loaded by default, but can be named.
	if err := s.SetEnabled("demo", false); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.Load(nil); len(l) != 0 {
		t.Fatal("a disabled ability was loaded")
	}
	if l, err := s.Load([]string{"demo"}); err != nil || len(l) != 1 {
		t.Fatalf("%v %v", l, err)
	}
	// A file changed after install is caught at load.
	_ = os.WriteFile(filepath.Join(s.DataDir, "demo", "bundle", "INSTRUCTIONS.md"), []byte("x"), 0o644)
	if _, err := s.Load([]string{"demo"}); err == nil || !strings.Contains(err.Error(), "INSTRUCTIONS.md changed") {
		t.Fatalf("tampered install loaded: %v", err)
	}
	if err := s.Remove("demo"); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.List(); len(l) != 0 {
		t.Fatalf("removed ability listed: %v", l)
	}
	if err := s.Remove("demo"); err == nil || !strings.Contains(err.Error(), "no ability") {
		t.Fatalf("removing twice: %v", err)
	}
}

func tarGz(t *testing.T, root, dir, out string) {
	t.Helper()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	err = filepath.Walk(filepath.Join(root, dir), func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		h, _ := tar.FileInfoHeader(fi, "")
		h.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			_, err = tw.Write(b)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = tw.Close()
	_ = zw.Close()
	_ = f.Close()
}

func TestManifestRefusals(t *testing.T) {
	files := map[string][]byte{"ability.json": nil, "server": nil}
	for _, c := range []struct{ manifest, want string }{
		{`{"name":"Bad Name","version":"1","useWhen":"x","server":{"command":"./server"}}`, "name"},
		{`{"name":"ok","useWhen":"x","server":{"command":"./server"}}`, "no version"},
		{`{"name":"ok","version":"1.0 (signed by 3f9a)                ","useWhen":"x","server":{"command":"./server"}}`, "version \"1.0 (signed by 3f9a)"},
		{`{"name":"ok","version":"1\u001b[2J","useWhen":"x","server":{"command":"./server"}}`, "letters, digits"},
		{`{"name":"ok","version":"1","useWhen":"two\nlines","server":{"command":"./server"}}`, "useWhen"},
		{`{"name":"ok","version":"1","useWhen":"x","server":{}}`, "neither command nor url"},
		{`{"name":"ok","version":"1","useWhen":"x","server":{"command":"x","url":"http://h"}}`, "both command and url"},
		{`{"name":"ok","version":"1","useWhen":"x","server":{"url":"ftp://h"}}`, "http:// or https://"},
		{`{"name":"ok","version":"1","useWhen":"x","server":{"command":"./missing"}}`, "not a file of the bundle"},
		{`{"name":"ok","version":"1","useWhen":"x","instructions":"README.md","server":{"command":"./server"}}`, "instructions names"},
		{`{"name":"ok","version":"1","useWhen":"x","timeout":"soon","server":{"command":"./server"}}`, "timeout"},
		{`{"name":"ok","version":"1","useWhen":"x","server":{"command":"./server"},"extra":1}`, "unknown field"},
	} {
		if _, err := ParseManifest([]byte(c.manifest), files); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.manifest, err, c.want)
		}
	}
}

// A rerun starts only abilities the user has enabled: one installed and
// disabled, or not installed, is refused by name whatever a trace asks.
func TestCheckEnabled(t *testing.T) {
	s := newStore(t)
	src := t.TempDir()
	writeBundle(t, src, "notes")
	if _, err := s.Install(src, true); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckEnabled([]string{"notes", "notes"}); err != nil {
		t.Fatalf("an enabled ability: %v", err)
	}
	if err := s.SetEnabled("notes", false); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckEnabled([]string{"notes"}); err == nil || !strings.Contains(err.Error(), "lloyal ability enable notes") {
		t.Fatalf("a disabled ability: %v", err)
	}
	if err := s.CheckEnabled([]string{"shell"}); err == nil || !strings.Contains(err.Error(), `no ability "shell" is installed`) {
		t.Fatalf("an ability not installed: %v", err)
	}
}
