package trace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/internal/regular"
)

// AttachmentInfo is a file the person gave the run (lloyal run --attach, a
// harness file's attachments:) as the header lists it. Its bytes are kept
// beside the trace (AttachmentsDir), by SHA256, so a rerun's tools read
// what the recorded run's read without the trace naming a path to open.
type AttachmentInfo struct {
	Name     string `json:"name"`
	MIMEType string `json:"mimeType"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
}

// Attached lists attachments as a header records them.
func Attached(list []engine.Attachment) []AttachmentInfo {
	var out []AttachmentInfo
	for _, a := range list {
		sum := sha256.Sum256(a.Data)
		out = append(out, AttachmentInfo{Name: a.Name, MIMEType: a.MIMEType, Size: int64(len(a.Data)), SHA256: hex.EncodeToString(sum[:])})
	}
	return out
}

// AttachmentsDir is the folder beside the trace at path that holds its
// attachments' bytes: run.jsonl's is run.attachments.
func AttachmentsDir(path string) string {
	return strings.TrimSuffix(path, filepath.Ext(path)) + ".attachments"
}

// SaveAttachments writes each attachment's bytes into AttachmentsDir(path)
// (Keep). It writes nothing when there are none.
func SaveAttachments(path string, list []engine.Attachment) error {
	for i, info := range Attached(list) {
		if err := Keep(path, list[i].Data); err != nil {
			return fmt.Errorf("keep attachment %s beside the trace: %w", info.Name, err)
		}
	}
	return nil
}

// Keep writes data into AttachmentsDir(path) as a file named by its
// sha256 (once: a file of that name holds the same bytes), readable by the
// person alone like the trace: the run's attachments, and the images shown
// to a model here, which a rerun shows again.
func Keep(path string, data []byte) error {
	dir := AttachmentsDir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	file := filepath.Join(dir, hex.EncodeToString(sum[:]))
	if _, err := os.Stat(file); err == nil {
		return nil
	}
	// Written whole or not at all: a file of the name is always the bytes.
	tmp, err := os.CreateTemp(dir, ".keep-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// Kept reads back what Keep kept beside the trace at path under sha256
// sum, at most max bytes, refused unless its hash is sum. what names it in
// errors.
func Kept(path, sum string, max int64, what string) ([]byte, error) {
	if len(sum) != 2*sha256.Size || strings.Trim(sum, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("the trace lists %s with sha256 %q, which is not one: the trace was edited", what, sum)
	}
	dir := AttachmentsDir(path)
	file := filepath.Join(dir, sum)
	data, err := regular.ReadFile(file, max) // a regular file only: a FIFO planted there would hang the read
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("the recorded run read %s, kept at %s, which is not there: copy the trace's %s folder with it", what, file, filepath.Base(dir))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != sum {
		return nil, fmt.Errorf("%s at %s is not the file the recorded run read (its sha256 differs)", what, file)
	}
	return data, nil
}

// LoadAttachments reads the attachments a header lists from beside the
// trace at path: each file at most its recorded size, and refused unless
// its sha256 is the recorded one. Only names the header gives by hash are
// opened, inside AttachmentsDir: a trace cannot point it at another file.
func LoadAttachments(path string, infos []AttachmentInfo) ([]engine.Attachment, error) {
	if len(infos) > engine.MaxImages {
		return nil, fmt.Errorf("the trace lists %d attachments, more than a run is given (%d): the trace was edited", len(infos), engine.MaxImages)
	}
	var out []engine.Attachment
	for _, info := range infos {
		if info.Size < 0 || info.Size > engine.MaxImageBytes {
			return nil, fmt.Errorf("the trace lists attachment %q at %d bytes, more than an attachment holds (%d)", info.Name, info.Size, engine.MaxImageBytes)
		}
		data, err := Kept(path, info.SHA256, info.Size, "attachment "+info.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, engine.Attachment{Name: info.Name, MIMEType: info.MIMEType, Data: data})
	}
	return out, nil
}
