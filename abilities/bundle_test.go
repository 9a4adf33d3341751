package abilities

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// signedDemo is a signed bundle of ability.json, b and policy, and the key
// that signed it.
func signedDemo(t *testing.T) (*Bundle, ed25519.PublicKey) {
	t.Helper()
	keys := t.TempDir()
	pub, err := GenerateKey(filepath.Join(keys, "k"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := ReadPrivateKey(filepath.Join(keys, "k"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "ability.json"), []byte(`{"name":"demo","version":"1","useWhen":"x","server":{"url":"http://127.0.0.1:1/mcp"}}`), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "b"), []byte("b's text\n"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "policy"), []byte("never delete\n"), 0o644)
	b, err := ReadBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := b.Sign(key)
	if err != nil {
		t.Fatal(err)
	}
	b.Files[SignatureFile] = sig
	if _, err := b.Verify(map[string]ed25519.PublicKey{KeyID(pub): pub}); err != nil {
		t.Fatalf("the untouched bundle: %v", err)
	}
	return b, pub
}

// A file name holding a newline cannot make two file lists sign alike:
// deleting policy and renaming b to "b\n<policy's digest>  policy" (the
// line the old text had for policy) is refused, whether the forged list
// reaches Verify or the forged name reaches ReadBundle.
func TestForgedFileListRefused(t *testing.T) {
	b, pub := signedDemo(t)
	var s Signature
	if err := json.Unmarshal(b.Files[SignatureFile], &s); err != nil {
		t.Fatal(err)
	}
	forged := "b\n" + s.Files["policy"] + "  policy"
	s.Files[forged] = s.Files["b"]
	delete(s.Files, "b")
	delete(s.Files, "policy")
	sig, _ := json.Marshal(s)
	b.Files[forged] = b.Files["b"]
	delete(b.Files, "b")
	delete(b.Files, "policy")
	b.Files[SignatureFile] = sig
	var ve *VerifyError
	if _, err := b.Verify(map[string]ed25519.PublicKey{KeyID(pub): pub}); !errors.As(err, &ve) || ve.Reason != "malformed" {
		t.Fatalf("a forged file list verified: %v", err)
	}
	// The same list with the name check gone still fails on the
	// signature: the signed text quotes each name.
	if string(signed(map[string]string{"ability.json": s.Files["ability.json"], forged: s.Files[forged]})) ==
		string(signed(map[string]string{"ability.json": s.Files["ability.json"], "b": s.Files[forged], "policy": strings.Split(forged, "\n")[1][:128]})) {
		t.Fatal("two file lists give one signed text")
	}

	dir := t.TempDir()
	for name, data := range b.Files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ReadBundle(dir); err == nil || !strings.Contains(err.Error(), "control character") {
		t.Fatalf("a name with a newline was read: %v", err)
	}
}

// A digest that is not 128 hex digits is refused before the signature is
// checked.
func TestVerifyRefusesOddDigests(t *testing.T) {
	b, pub := signedDemo(t)
	var s Signature
	_ = json.Unmarshal(b.Files[SignatureFile], &s)
	s.Files["b"] = strings.ToUpper(s.Files["b"])
	b.Files[SignatureFile], _ = json.Marshal(s)
	var ve *VerifyError
	if _, err := b.Verify(map[string]ed25519.PublicKey{KeyID(pub): pub}); !errors.As(err, &ve) || ve.Reason != "malformed" {
		t.Fatalf("got %v, want a malformed refusal", err)
	}
}

// Trust is in the key, not its 64-bit id: another key under the signer's
// id is not the signer.
func TestVerifyComparesTheWholeKey(t *testing.T) {
	b, pub := signedDemo(t)
	other, _, _ := ed25519.GenerateKey(nil)
	var ve *VerifyError
	if _, err := b.Verify(map[string]ed25519.PublicKey{KeyID(pub): other}); !errors.As(err, &ve) || ve.Reason != "untrusted-key" {
		t.Fatalf("a key trusted under the signer's id verified the bundle: %v", err)
	}
}

type tarEntry struct {
	name string
	typ  byte
	body string
}

func writeTarGz(t *testing.T, entries []tarEntry) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
			h.Linkname = "ability.json"
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			_, _ = tw.Write([]byte(e.body))
		}
	}
	_ = tw.Close()
	_ = zw.Close()
	p := filepath.Join(t.TempDir(), "b.tar.gz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const okManifest = `{"name":"demo","version":"1","useWhen":"x","server":{"url":"http://127.0.0.1:1/mcp"}}`

// ReadBundle refuses what could lead outside the bundle, stand for another
// file, or exhaust the machine, from a folder and from a tarball alike.
func TestReadBundleRefusesHostileInput(t *testing.T) {
	manifest := tarEntry{"ability.json", tar.TypeReg, okManifest}
	tgz := func(e ...tarEntry) func(t *testing.T) string {
		return func(t *testing.T) string { return writeTarGz(t, e) }
	}
	folder := func(extra func(t *testing.T, dir string)) func(t *testing.T) string {
		return func(t *testing.T) string {
			dir := t.TempDir()
			_ = os.WriteFile(filepath.Join(dir, "ability.json"), []byte(okManifest), 0o644)
			extra(t, dir)
			return dir
		}
	}
	many := []tarEntry{manifest}
	for i := range maxEntries {
		many = append(many, tarEntry{fmt.Sprintf("f%d", i), tar.TypeReg, ""})
	}
	cases := []struct {
		name string
		make func(t *testing.T) string
		want string // "" reads
	}{
		{"tar ok", tgz(manifest, tarEntry{"./x", tar.TypeReg, "x"}), ""},
		{"tar top folder stripped", tgz(tarEntry{"demo/ability.json", tar.TypeReg, okManifest}, tarEntry{"demo/x", tar.TypeReg, "x"}), ""},
		{"tar dot-dot", tgz(manifest, tarEntry{"../evil", tar.TypeReg, "x"}), "leads outside"},
		{"tar inner dot-dot", tgz(manifest, tarEntry{"a/../../evil", tar.TypeReg, "x"}), "leads outside"},
		{"tar absolute", tgz(manifest, tarEntry{"/etc/evil", tar.TypeReg, "x"}), "leads outside"},
		{"tar symlink", tgz(manifest, tarEntry{"link", tar.TypeSymlink, ""}), "not a regular file"},
		{"tar hard link", tgz(manifest, tarEntry{"link", tar.TypeLink, ""}), "not a regular file"},
		{"tar device", tgz(manifest, tarEntry{"dev", tar.TypeChar, ""}), "not a regular file"},
		{"tar fifo", tgz(manifest, tarEntry{"fifo", tar.TypeFifo, ""}), "not a regular file"},
		{"tar duplicate", tgz(manifest, tarEntry{"x", tar.TypeReg, "a"}, tarEntry{"./x", tar.TypeReg, "b"}), "appears twice"},
		{"tar control character", tgz(manifest, tarEntry{"a\x1bb", tar.TypeReg, "x"}), "control character"},
		{"tar newline", tgz(manifest, tarEntry{"a\nb", tar.TypeReg, "x"}), "control character"},
		{"tar too many entries", tgz(many...), "over 10000 files"},
		{"tar too big", func(t *testing.T) string {
			// A header claiming more than the cap is refused before its
			// data is read, so the data need not be there.
			p := filepath.Join(t.TempDir(), "big.tar.gz")
			f, _ := os.Create(p)
			zw := gzip.NewWriter(f)
			tw := tar.NewWriter(zw)
			_ = tw.WriteHeader(&tar.Header{Name: "ability.json", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(okManifest))})
			_, _ = tw.Write([]byte(okManifest))
			_ = tw.WriteHeader(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Mode: 0o644, Size: maxBundle + 1})
			_ = tw.Flush()
			_ = zw.Close()
			_ = f.Close()
			return p
		}, "over 512 MiB"},
		{"tar too big together", func(t *testing.T) string {
			// Each file under the cap, both over it: the manifest's bytes
			// count against the next header's claim.
			p := filepath.Join(t.TempDir(), "big.tar.gz")
			f, _ := os.Create(p)
			zw := gzip.NewWriter(f)
			tw := tar.NewWriter(zw)
			_ = tw.WriteHeader(&tar.Header{Name: "ability.json", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(okManifest))})
			_, _ = tw.Write([]byte(okManifest))
			_ = tw.WriteHeader(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Mode: 0o644, Size: maxBundle - int64(len(okManifest)) + 1})
			_ = tw.Flush()
			_ = zw.Close()
			_ = f.Close()
			return p
		}, "over 512 MiB"},
		{"folder too big", folder(func(t *testing.T, dir string) {
			// Sparse: a file that says it is over the cap costs no disk.
			f, err := os.Create(filepath.Join(dir, "big"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(maxBundle + 1); err != nil {
				t.Skip("cannot make a sparse file here:", err)
			}
		}), "over 512 MiB"},
		{"folder ok", folder(func(*testing.T, string) {}), ""},
		{"folder through a link", func(t *testing.T) string {
			link := filepath.Join(t.TempDir(), "link")
			if err := os.Symlink(folder(func(*testing.T, string) {})(t), link); err != nil {
				t.Fatal(err)
			}
			return link
		}, ""},
		{"folder symlink", folder(func(t *testing.T, dir string) {
			_ = os.Symlink("/etc/passwd", filepath.Join(dir, "link"))
		}), "not a regular file"},
		{"folder fifo", folder(func(t *testing.T, dir string) {
			if err := mkfifo(filepath.Join(dir, "fifo")); err != nil {
				t.Skip(err)
			}
		}), "not a regular file"},
		{"folder device", folder(func(t *testing.T, dir string) {
			if err := mkdevice(filepath.Join(dir, "null")); err != nil {
				t.Skip("cannot make a device here:", err)
			}
		}), "not a regular file"},
		{"a fifo as the bundle", func(t *testing.T) string {
			// Opening it to read would wait for a writer for good.
			p := filepath.Join(t.TempDir(), "bundle.tar.gz")
			if err := mkfifo(p); err != nil {
				t.Skip(err)
			}
			return p
		}, "not a regular file"},
		{"folder control character", folder(func(t *testing.T, dir string) {
			_ = os.WriteFile(filepath.Join(dir, "a\tb"), nil, 0o644)
		}), "control character"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := ReadBundle(c.make(t))
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := b.Files[ManifestFile]; !ok {
					t.Fatalf("no manifest at the root: %v", b.Files)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a refusal saying %q", err, c.want)
			}
		})
	}
}
