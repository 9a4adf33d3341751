package abilities

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"github.com/lloyal-ai/lloyal/internal/regular"
	"os"
)

// Keys are PEM files: a public key is PKIX ("PUBLIC KEY"), a private key
// PKCS #8 ("PRIVATE KEY"), the forms `openssl genpkey -algorithm ed25519`
// writes, so authors may make keys with either tool.

// KeyID names a public key: the first 16 hex digits of its SHA-256.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// GenerateKey makes a signing key pair and writes it as PEM: the private
// key to priv (mode 0600), the public key to priv+".pub". It refuses to
// overwrite either.
func GenerateKey(priv string) (ed25519.PublicKey, error) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate a key: %w (the system's random source failed; try again)", err)
	}
	// An Ed25519 key always marshals: an error here is a bug.
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode the private key: %w", err)
	}
	pp, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encode the public key: %w", err)
	}
	for _, f := range []struct {
		path string
		typ  string
		der  []byte
		mode os.FileMode
	}{{priv, "PRIVATE KEY", pk, 0o600}, {priv + ".pub", "PUBLIC KEY", pp, 0o644}} {
		w, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
		if err != nil {
			return nil, fmt.Errorf("write the key %s: %w (choose another name; an existing key is never overwritten)", f.path, err)
		}
		err = pem.Encode(w, &pem.Block{Type: f.typ, Bytes: f.der})
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("write the key %s: %w (check the folder's permissions and room; remove the partial file)", f.path, err)
		}
	}
	return pub, nil
}

// maxKeyFile bounds a key file read: a PEM Ed25519 key is about 120 bytes.
const maxKeyFile = 64 << 10

func readPEM(path, want string) ([]byte, error) {
	data, err := regular.ReadFile(path, maxKeyFile)
	if err != nil {
		return nil, fmt.Errorf("read the key %s: %w (give the path of a PEM key file)", path, err)
	}
	blk, _ := pem.Decode(data)
	if blk == nil || blk.Type != want {
		return nil, fmt.Errorf("%s is not a PEM %q block: give an Ed25519 key as `lloyal ability keygen` or `openssl genpkey -algorithm ed25519` writes it", path, want)
	}
	return blk.Bytes, nil
}

// ReadPublicKey reads an Ed25519 public key file (PEM, PKIX). A private key
// file is refused: trust is given to public keys only.
func ReadPublicKey(path string) (ed25519.PublicKey, error) {
	der, err := readPEM(path, "PUBLIC KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%s holds a %T key: abilities are signed with Ed25519 keys only", path, k)
	}
	return pub, nil
}

// ReadPrivateKey reads an Ed25519 private key file (PEM, PKCS #8).
func ReadPrivateKey(path string) (ed25519.PrivateKey, error) {
	der, err := readPEM(path, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s holds a %T key: abilities are signed with Ed25519 keys only", path, k)
	}
	return key, nil
}

// EncodePublicKey is pub as a PEM file's contents.
func EncodePublicKey(pub ed25519.PublicKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(pub)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}
