package event

// ShownImage is an image written into an agent's branch for a model here
// to see (a branch:prefill's data, {"images": [...]}): its id in the
// result that named it, its file's name and type, the sha256 of its bytes
// (kept beside the trace) and the positions its embeddings filled.
type ShownImage struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	MIMEType  string `json:"mimeType"`
	SHA256    string `json:"sha256"`
	Positions int    `json:"positions"`
}

// PrefillImages is a branch:prefill's data when images were among what it
// wrote.
type PrefillImages struct {
	Images []ShownImage `json:"images"`
}
