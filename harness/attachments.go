package harness

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/internal/regular"
)

// Bounds on the files a run is given: as many as a run shows images, each
// no larger than an image it shows.
const (
	MaxAttachments     = engine.MaxImages
	MaxAttachmentBytes = engine.MaxImageBytes
)

// Stage reads the files a run is given: the harness file's attachments:
// (each inside the file's folder, so a harness from elsewhere cannot hand
// the model a file of yours) and then paths, the person's own --attach.
// Each is named by its base name, which must be unique; its type is read
// from its bytes (a text file's from its extension).
func (f *File) Stage(paths []string) ([]engine.Attachment, error) {
	var files []string
	for i, p := range f.Attachments {
		full, err := f.inside(p)
		if err != nil {
			return nil, fmt.Errorf("%s: attachments[%d]: %w", f.Path, i, err)
		}
		files = append(files, full)
	}
	files = append(files, paths...)
	if len(files) > MaxAttachments {
		return nil, fmt.Errorf("%d files attached: a run takes at most %d", len(files), MaxAttachments)
	}
	var out []engine.Attachment
	seen := map[string]string{}
	for _, file := range files {
		a, err := stage(file)
		if err != nil {
			return nil, err
		}
		if prev, ok := seen[a.Name]; ok {
			return nil, fmt.Errorf("two attachments are named %s (%s and %s): the model asks for them by name; rename one", a.Name, prev, file)
		}
		seen[a.Name] = file
		out = append(out, a)
	}
	return out, nil
}

// stage reads one attachment.
func stage(file string) (engine.Attachment, error) {
	data, err := regular.ReadFile(file, MaxAttachmentBytes)
	if err != nil {
		return engine.Attachment{}, attachError(file, err)
	}
	return engine.Attachment{Name: filepath.Base(file), MIMEType: mimeType(file, data), Data: data}, nil
}

// checkAttachment is what stage would refuse of file, found without
// reading it (harness check).
func checkAttachment(file string) error {
	fd, err := regular.Open(file)
	if err != nil {
		return attachError(file, err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err == nil && st.Size() > MaxAttachmentBytes {
		err = regular.ErrTooLarge
	}
	return attachError(file, err)
}

// attachError says what is wrong with an attachment and what to do (nil:
// nothing).
func attachError(file string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, regular.ErrNotRegular):
		return fmt.Errorf("attach %s: %w: attach files, not folders, pipes or devices", file, err)
	case errors.Is(err, regular.ErrTooLarge):
		return fmt.Errorf("attach %s: more than the %d an attachment holds", file, MaxAttachmentBytes)
	}
	return fmt.Errorf("attach %s: %w", file, err)
}

// textTypes are the types of text files told apart by their extension
// (sniffing reads them all as text/plain); a fixed table, so a file's type
// does not depend on the machine's mime.types.
var textTypes = map[string]string{
	".md": "text/markdown", ".markdown": "text/markdown", ".csv": "text/csv", ".json": "application/json",
	".yaml": "application/yaml", ".yml": "application/yaml", ".html": "text/html", ".htm": "text/html",
	".xml": "application/xml", ".go": "text/x-go", ".py": "text/x-python", ".js": "text/javascript",
}

// mimeType is a file's type, read from its first bytes (an image's format),
// or from its extension for a text file.
func mimeType(file string, data []byte) string {
	t, _, err := mime.ParseMediaType(http.DetectContentType(data))
	if err != nil {
		t = "application/octet-stream"
	}
	if t == "text/plain" {
		if e, ok := textTypes[strings.ToLower(filepath.Ext(file))]; ok {
			return e
		}
	}
	return t
}
