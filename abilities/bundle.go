package abilities

import (
	"archive/tar"
	"compress/gzip"
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/lloyal-ai/lloyal/internal/regular"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// SignatureFile is the signature's name at the bundle's root. It is the one
// file the signature does not cover.
const SignatureFile = "ability.sig"

// signatureFormat names the signed text's layout; it is the first line of
// what is signed, so a signature can never be read as another format's.
const signatureFormat = "lloyal-ability-signature/2"

// maxEntries bounds a bundle's number of files, as maxBundle bounds its
// size: a tarball of a million empty files is refused before it is held.
const maxEntries = 10000

// maxBundle bounds a bundle's size (every file together): a server binary
// fits, a mistake (a home folder) does not.
const maxBundle = 512 << 20

// Bundle is an ability's files, read whole, by slash-separated path.
type Bundle struct {
	// Files is every file's contents by slash-separated path from the
	// bundle's root.
	Files map[string][]byte
	// Exec lists the files that were executable (a server binary).
	Exec map[string]bool
	// Manifest is ability.json, parsed and checked against Files.
	Manifest *Manifest
	// Source is where the bundle was read from.
	Source string
}

// ReadBundle reads a bundle folder or a .tar.gz of one and parses its
// manifest. Links, devices and paths leading outside the bundle are refused.
func ReadBundle(p string) (*Bundle, error) {
	b := &Bundle{Files: map[string][]byte{}, Exec: map[string]bool{}, Source: p}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("read the ability bundle: %w (give a folder or a .tar.gz holding %s)", err, ManifestFile)
	}
	if fi.IsDir() {
		// A link to the folder is followed (once, here); links inside
		// the bundle are still refused.
		var root string
		if root, err = filepath.EvalSymlinks(p); err == nil {
			err = b.readDir(root)
		}
	} else {
		err = b.readTarGz(p)
	}
	if err != nil {
		return nil, err
	}
	b.stripTop()
	data, ok := b.Files[ManifestFile]
	if !ok {
		return nil, fmt.Errorf("%s has no %s at its root: an ability bundle needs a manifest", p, ManifestFile)
	}
	if b.Manifest, err = ParseManifest(data, b.Files); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return b, nil
}

// checkName refuses a file name that cannot be written down unambiguously:
// one with a control character (a newline could forge a line of a file
// list) or invalid UTF-8.
func checkName(name string) error {
	if !utf8.ValidString(name) || strings.ContainsFunc(name, unicode.IsControl) {
		return fmt.Errorf("the file name %q in the bundle holds a control character or is not UTF-8: rename the file", name)
	}
	return nil
}

// add reads one file of size bytes (as its tar header or its folder entry
// says) into the bundle.
func (b *Bundle) add(name string, r io.Reader, size int64, exec bool, total *int64) error {
	if err := checkName(name); err != nil {
		return err
	}
	if len(b.Files) >= maxEntries {
		return fmt.Errorf("the bundle holds over %d files: an ability holds its manifest, instructions and server, not data", maxEntries)
	}
	// A file the header or the folder says is too big is refused before a
	// byte of it is read; the limited read still holds one that grows.
	tooBig := fmt.Errorf("the bundle is over %d MiB: an ability holds its manifest, instructions and server, not data", maxBundle>>20)
	if size > maxBundle-*total {
		return tooBig
	}
	data, err := io.ReadAll(io.LimitReader(r, maxBundle-*total+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	*total += int64(len(data))
	if *total > maxBundle {
		return tooBig
	}
	b.Files[name] = data
	b.Exec[name] = exec
	return nil
}

func (b *Bundle) readDir(root string) error {
	var total int64
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("read the bundle %s: %w (check its permissions)", root, err)
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s in the bundle is not a regular file (a link or device): put the file itself in the bundle", rel)
		}
		fi, err := d.Info()
		if err != nil {
			return fmt.Errorf("read %s in the bundle: %w (check its permissions)", rel, err)
		}
		f, err := regular.Open(p)
		if err != nil {
			return fmt.Errorf("read %s in the bundle: %w (check its permissions)", rel, err)
		}
		defer f.Close()
		return b.add(rel, f, fi.Size(), fi.Mode()&0o111 != 0, &total)
	})
}

func (b *Bundle) readTarGz(p string) error {
	f, err := regular.Open(p)
	if err != nil {
		return fmt.Errorf("read the bundle %s: %w (check its permissions)", p, err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s is neither a folder nor a .tar.gz: %w", p, err)
	}
	tr := tar.NewReader(zr)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		switch {
		case h.Typeflag == tar.TypeDir || name == ".":
			continue
		case h.Typeflag != tar.TypeReg:
			return fmt.Errorf("%s in %s is not a regular file (a link or device): put the file itself in the bundle", h.Name, p)
		case !filepath.IsLocal(filepath.FromSlash(name)):
			return fmt.Errorf("%s in %s leads outside the bundle: refused", h.Name, p)
		}
		if _, dup := b.Files[name]; dup {
			return fmt.Errorf("%s appears twice in %s: refused", name, p)
		}
		if err := b.add(name, tr, h.Size, h.Mode&0o111 != 0, &total); err != nil {
			return err
		}
	}
}

// stripTop makes a bundle packed as one top folder (tar czf x.tar.gz dir)
// rooted at that folder.
func (b *Bundle) stripTop() {
	if _, ok := b.Files[ManifestFile]; ok || len(b.Files) == 0 {
		return
	}
	top := ""
	for name := range b.Files {
		first, _, ok := strings.Cut(name, "/")
		if !ok || (top != "" && first != top) {
			return
		}
		top = first
	}
	files, exec := map[string][]byte{}, map[string]bool{}
	for name, data := range b.Files {
		rest := strings.TrimPrefix(name, top+"/")
		files[rest], exec[rest] = data, b.Exec[name]
	}
	b.Files, b.Exec = files, exec
}

// Digests is the SHA-512 of every file the signature covers (all but the
// signature), by path.
func (b *Bundle) Digests() map[string]string {
	out := map[string]string{}
	for name, data := range b.Files {
		if name == SignatureFile {
			continue
		}
		sum := sha512.Sum512(data)
		out[name] = hex.EncodeToString(sum[:])
	}
	return out
}

// Signature is ability.sig: the signer's public key, the digest of every
// file, and an Ed25519 signature over them.
type Signature struct {
	// Format is signatureFormat: the layout of the text signed.
	Format string `json:"format"`
	// Key is the signer's Ed25519 public key, base64.
	Key string `json:"key"`
	// Files is the SHA-512 (lowercase hex) of every file but ability.sig,
	// by slash-separated path.
	Files map[string]string `json:"files"`
	// Signature is the Ed25519 signature of the signed text, base64.
	Signature string `json:"signature"`
}

// signed is the text a signature covers: the format's line, then the file
// list as a JSON array of [path, SHA512-HEX] pairs sorted by path. JSON
// quotes every name, so no two file lists give the same text (a name
// holding a newline cannot pose as another file's line).
func signed(files map[string]string) []byte {
	list := make([][2]string, 0, len(files))
	for _, n := range slices.Sorted(maps.Keys(files)) {
		list = append(list, [2]string{n, files[n]})
	}
	enc, _ := json.Marshal(list) // strings only: it cannot fail
	return append([]byte(signatureFormat+"\n"), enc...)
}

// Sign signs the bundle with key and returns ability.sig's contents.
func (b *Bundle) Sign(key ed25519.PrivateKey) ([]byte, error) {
	files := b.Digests()
	pub := key.Public().(ed25519.PublicKey)
	s := Signature{Format: signatureFormat, Key: base64.StdEncoding.EncodeToString(pub), Files: files,
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, signed(files)))}
	return json.MarshalIndent(s, "", "  ")
}

// VerifyError says why a bundle's signature was not accepted.
type VerifyError struct {
	// Reason is one of: unsigned, malformed, bad-signature, changed-manifest,
	// changed-file, added-file, missing-file, untrusted-key.
	Reason string
	// Msg says what was wrong and what to do.
	Msg string
}

func (e *VerifyError) Error() string { return e.Msg }

// Verify checks the bundle's signature: that ability.sig is well formed and
// its signature holds over its file list, that every file (the manifest
// first) has the digest it was signed with and none was added or removed,
// and that trusted holds the signing key. It returns the key's id.
func (b *Bundle) Verify(trusted map[string]ed25519.PublicKey) (string, error) {
	fail := func(reason, format string, args ...any) (string, error) {
		return "", &VerifyError{Reason: reason, Msg: fmt.Sprintf(format, args...)}
	}
	raw, ok := b.Files[SignatureFile]
	if !ok {
		return fail("unsigned", "the bundle is not signed: it has no %s (its author signs it with `lloyal ability sign`; to install it anyway, pass --allow-unsigned)", SignatureFile)
	}
	var s Signature
	if err := json.Unmarshal(raw, &s); err != nil || s.Format != signatureFormat {
		return fail("malformed", "%s is not a %s signature (%v): ask the author to sign the bundle again", SignatureFile, signatureFormat, err)
	}
	pub, err := base64.StdEncoding.DecodeString(s.Key)
	sig, err2 := base64.StdEncoding.DecodeString(s.Signature)
	if err != nil || err2 != nil || len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return fail("malformed", "%s holds no valid Ed25519 key and signature: ask the author to sign the bundle again", SignatureFile)
	}
	id := KeyID(pub)
	for name, sum := range s.Files {
		if checkName(name) != nil || !isDigest(sum) {
			return fail("malformed", "%s lists the file %q with digest %q: a name must hold no control character and a digest must be 128 hex digits; do not install this bundle", SignatureFile, name, sum)
		}
	}
	if !ed25519.Verify(pub, signed(s.Files), sig) {
		return fail("bad-signature", "the signature in %s does not match its list of files (key %s): the signature file was altered; do not install this bundle", SignatureFile, id)
	}
	have := b.Digests()
	if have[ManifestFile] != s.Files[ManifestFile] {
		return fail("changed-manifest", "the manifest %s changed after the bundle was signed (key %s): do not install this bundle, or ask its author to sign it again", ManifestFile, id)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Files)) {
		got, ok := have[name]
		switch {
		case !ok:
			return fail("missing-file", "%s was signed but is missing from the bundle (key %s): do not install this bundle", name, id)
		case got != s.Files[name]:
			return fail("changed-file", "%s changed after the bundle was signed (its SHA-512 differs; key %s): do not install this bundle, or ask its author to sign it again", name, id)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(have)) {
		if _, ok := s.Files[name]; !ok {
			return fail("added-file", "%s was added to the bundle after it was signed (key %s): do not install this bundle", name, id)
		}
	}
	// The id is 64 bits of the key's hash: the key itself must match too.
	if k, ok := trusted[id]; !ok || !k.Equal(ed25519.PublicKey(pub)) {
		return fail("untrusted-key", "the bundle is signed by key %s, which you do not trust: if you trust its author, run `lloyal ability trust KEYFILE` with their public key", id)
	}
	return id, nil
}

// isDigest: s is a SHA-512 as lowercase hex, as Digests writes it.
func isDigest(s string) bool {
	if len(s) != 2*sha512.Size {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// SignFolder signs the bundle folder dir with key and writes the signature
// beside its manifest (dir/ability.sig), returning the bundle and the
// signature's path.
func SignFolder(dir string, key ed25519.PrivateKey) (*Bundle, string, error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, "", fmt.Errorf("sign %s: give the bundle's folder (pack it as .tar.gz after signing)", dir)
	}
	b, err := ReadBundle(dir)
	if err != nil {
		return nil, "", err
	}
	sig, err := b.Sign(key)
	if err != nil {
		return nil, "", err
	}
	p := filepath.Join(dir, SignatureFile)
	return b, p, os.WriteFile(p, sig, 0o644)
}
