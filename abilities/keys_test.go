package abilities

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A key file is read as a regular file of at most maxKeyFile bytes: a FIFO
// named as a key would wait for a writer for good, /dev/zero never ends.
func TestAKeyFileIsBounded(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.pem")
	if err := os.WriteFile(big, make([]byte, maxKeyFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.pem")
	if err := mkfifo(fifo); err != nil {
		t.Skip(err)
	}
	for _, c := range []struct{ path, want string }{
		{fifo, "not a regular file"},
		{big, "more than"},
	} {
		if _, err := ReadPublicKey(c.path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.path, err, c.want)
		}
	}
}
