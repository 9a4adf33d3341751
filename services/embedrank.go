package services

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/lloyal-ai/lloyal/internal/regular"
)

// An embed service ranks too: a passage's score is its embedding's cosine
// with the query's (a bi-encoder, where a rerank service reads query and
// passage together). Passages' embeddings are kept on disk, so a corpus
// is embedded once per model.

// Identifier is a Service that can say which model it runs exactly (a file
// here: its path, size and the hash of its first MiB; a server: its URL
// and the model's name there): the disk cache's key.
type Identifier interface {
	Identity() string
}

// embedRanker is an Embedder as a Ranker, its passages' vectors cached in
// dir (none: no cache).
type embedRanker struct {
	e   Embedder
	dir string
}

// CacheDir is where embed services keep passages' vectors: the user's cache
// folder's lloyal/embeddings ("" where there is none).
func CacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "lloyal", "embeddings")
}

// rankerOf is an embed service as a Ranker, caching under CacheDir when
// the service can say which model it runs.
func rankerOf(v Service) Ranker {
	e := v.(Embedder)
	r := &embedRanker{e: e}
	if id, ok := v.(Identifier); ok && CacheDir() != "" {
		sum := sha256.Sum256([]byte(id.Identity()))
		r.dir = filepath.Join(CacheDir(), hex.EncodeToString(sum[:12]))
	}
	return r
}

// Rank scores each document by its cosine with the query, embedding only
// the documents the cache does not hold.
func (r *embedRanker) Rank(ctx context.Context, query string, docs []string, progress func(done, total int)) ([]float64, error) {
	vecs := make([][]float32, len(docs))
	texts, fresh := []string{query}, []int{}
	for i, d := range docs {
		if v := r.load(d); v != nil {
			vecs[i] = v
			continue
		}
		texts, fresh = append(texts, d), append(fresh, i)
	}
	got, err := r.embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	q := got[0]
	// keep takes the vectors of docs[idx] and caches those of the query's
	// length.
	keep := func(idx []int, vs [][]float32) {
		for k, i := range idx {
			if vecs[i] = vs[k]; len(vecs[i]) == len(q) {
				r.store(docs[i], vecs[i])
			}
		}
	}
	keep(fresh, got[1:])
	// A cached vector of another length than the query's is stale (the
	// server's model changed under its name): embedded again and cached
	// anew, where it failed every later ranking until the cache was
	// cleared.
	var stale []int
	texts = texts[:0]
	for i, v := range vecs {
		if len(v) != len(q) {
			stale, texts = append(stale, i), append(texts, docs[i])
		}
	}
	if len(stale) > 0 {
		again, err := r.embed(ctx, texts)
		if err != nil {
			return nil, err
		}
		keep(stale, again)
	}
	scores := make([]float64, len(docs))
	for i, v := range vecs {
		if len(v) != len(q) {
			return nil, fmt.Errorf("embed: the embedder answered a passage's vector of %d dimensions and the query's of %d", len(v), len(q))
		}
		scores[i] = cosine(q, v)
	}
	if progress != nil {
		progress(len(docs), len(docs))
	}
	return scores, nil
}

// embed is the embedder's vectors of texts, one each.
func (r *embedRanker) embed(ctx context.Context, texts []string) ([][]float32, error) {
	got, err := r.e.Embed(ctx, texts)
	if err == nil && len(got) != len(texts) {
		err = fmt.Errorf("embed: %d vectors for %d texts", len(got), len(texts))
	}
	return got, err
}

// cosine is the cosine of a and b (0 when either is all zeros).
func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}

// maxCachedDims bounds a cached vector a load reads.
const maxCachedDims = 1 << 16

// file is where text's vector is cached.
func (r *embedRanker) file(text string) string {
	sum := sha256.Sum256([]byte(text))
	return filepath.Join(r.dir, hex.EncodeToString(sum[:16])+".f32")
}

// load is text's cached vector (nil: none, or unreadable).
func (r *embedRanker) load(text string) []float32 {
	if r.dir == "" {
		return nil
	}
	// The cache folder is the user's, but its files are read only as
	// regular files of a vector's size: a FIFO there would hang the run.
	b, err := regular.ReadFile(r.file(text), 4*maxCachedDims)
	if err != nil || len(b) == 0 || len(b)%4 != 0 || len(b)/4 > maxCachedDims {
		return nil
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// store caches text's vector, written whole or not at all (a failure only
// costs the next run an embedding).
func (r *embedRanker) store(text string, v []float32) {
	if r.dir == "" || len(v) == 0 || len(v) > maxCachedDims {
		return
	}
	if os.MkdirAll(r.dir, 0o700) != nil {
		return
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	tmp, err := os.CreateTemp(r.dir, "tmp-*")
	if err != nil {
		return
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil && cerr == nil {
		if os.Rename(tmp.Name(), r.file(text)) == nil {
			return
		}
	}
	os.Remove(tmp.Name())
}
