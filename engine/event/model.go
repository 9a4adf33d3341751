package event

// ModelInfo identifies a model, for trace headers and the UI.
type ModelInfo struct {
	Ref         string `json:"ref"`  // what the user asked for
	Path        string `json:"path"` // the GGUF file
	Name        string `json:"name,omitempty"`
	Size        int64  `json:"size"`
	SHA256First string `json:"sha256FirstMiB,omitempty"`
	// SHA256 is the whole file's (a rerun checks it; an ollama blob's is
	// its digest).
	SHA256       string `json:"sha256,omitempty"`
	OllamaDigest string `json:"ollamaDigest,omitempty"`
	Architecture string `json:"architecture"`
	NCtxTrain    int    `json:"nCtxTrain"`
	NVocab       int    `json:"nVocab"`
	NParams      uint64 `json:"nParams"`
	Format       string `json:"chatFormat"`
}
