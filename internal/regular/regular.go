// Package regular opens regular files only. A path from a user, a model or
// a folder may name a FIFO, a device or a socket: opening a FIFO for reading
// blocks until someone writes to it, and /dev/zero never ends. Every open
// here is non-blocking, and the kind is checked on the opened handle (not
// on the path, which could be swapped between a check and the open).
package regular

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is what the functions here return, wrapped with the path,
// for anything that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// Open opens path for reading: a regular file, or an error naming what it is.
func Open(path string) (*os.File, error) {
	return OpenFile(path, os.O_RDONLY, 0)
}

// OpenFile is os.OpenFile for regular files only: it opens without
// blocking (a FIFO with nobody on the other end neither hangs the open nor,
// for writing, succeeds) and refuses anything else that opened.
func OpenFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK|syscall.O_CLOEXEC, perm)
	if err != nil {
		return nil, err
	}
	return f, Check(f, path)
}

// OpenIn is OpenFile inside root (os.Root refuses paths that lead out of it).
func OpenIn(root *os.Root, name string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := root.OpenFile(name, flag|syscall.O_NONBLOCK|syscall.O_CLOEXEC, perm)
	if err != nil {
		return nil, err
	}
	return f, Check(f, name)
}

// Check refuses an opened file that is not a regular file, closing it.
func Check(f fs.File, name string) error {
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: it is %s", ErrNotRegular, Kind(st.Mode()))}
	}
	return nil
}

// Kind names a file mode's type for an error.
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

// ErrTooLarge is returned, wrapped, by ReadFile for a file over its limit.
var ErrTooLarge = errors.New("file too large")

// ReadFile reads a regular file of at most limit bytes.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)}
	}
	return data, nil
}

// Links returns a file's identity (device and inode) and its hard-link
// count, when the platform reports them.
func Links(fi fs.FileInfo) (id FileID, nlink uint64, ok bool) {
	st, isStat := fi.Sys().(*syscall.Stat_t)
	if !isStat {
		return FileID{}, 0, false
	}
	return FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}, uint64(st.Nlink), true
}

// FileID identifies a file across its names.
type FileID struct{ Dev, Ino uint64 }

// SHA256 is the hex sha256 of the first n bytes of the regular file at
// path (all of it for n < 0; a shorter file is hashed whole).
func SHA256(path string, n int64) (string, error) {
	f, err := Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if n < 0 {
		_, err = io.Copy(h, f)
	} else if _, err = io.CopyN(h, f, n); errors.Is(err, io.EOF) {
		err = nil
	}
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
