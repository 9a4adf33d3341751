// Package demoranker holds lloyal's demo reranker: a translation language
// model trained on the built-in Tidewater handbook, which reranks the
// research harness's searches by default (a service of kind rerank named
// Name). It is no neural network: it learned, from questions written by
// hand about the handbook (training-questions.tsv, apart from the tuning
// and held-out sets), which words a question uses for the words a passage
// uses ("dashboard" for "lighthouse", "refresh" for "update"), and which
// questions each passage answers. A search's passage is scored by how
// likely its words, so translated, make the question, and that score is
// blended with the first stage's.
package demoranker

import (
	"crypto/sha256"
	_ "embed" // the trained model and its training questions
	"encoding/hex"
	"fmt"

	"github.com/lloyal-ai/lloyal/services"
)

// Name is the model name a service spec gives to get the demo reranker
// (`model: lloyal-demo-reranker`).
const Name = "lloyal-demo-reranker"

//go:embed lloyal-demo-reranker.tlm
var shipped []byte

// TrainingQuestions are the questions the shipped model trained on, in
// the held-out set's columns (internal/questions).
//
//go:embed training-questions.tsv
var TrainingQuestions string

// Shipped is the trained model lloyal ships, read from its file.
func Shipped() (*Model, error) { return Decode(shipped) }

// Service is the demo reranker as a service: its Model is a
// services.Ranker, and a tools.FirstStageReranker a search funnel gives
// the first stage's scores.
type Service struct {
	*Model
	spec services.Spec
	sum  string
}

// Open opens the shipped model as the service sp names (of kind rerank).
func Open(sp services.Spec) (*Service, error) {
	if sp.Kind != services.Rerank {
		return nil, fmt.Errorf("%s reranks: give it kind rerank, not %s", Name, sp.Kind)
	}
	if sp.Server != "" {
		return nil, fmt.Errorf("%s is built into lloyal: it runs here, not at %s (remove server:)", Name, sp.Server)
	}
	m, err := Shipped()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(shipped)
	return &Service{Model: m, spec: sp, sum: hex.EncodeToString(sum[:])}, nil
}

// Opener opens a spec whose model is Name itself and hands any other to
// next (llamaservice.Open), so a harness file names the demo reranker as
// it names a model file.
func Opener(next services.Opener) services.Opener {
	return func(sp services.Spec) (services.Service, error) {
		if sp.Model == Name {
			return Open(sp)
		}
		if next == nil {
			return nil, services.ErrNoLlama
		}
		return next(sp)
	}
}

// Spec is the spec it was opened as.
func (s *Service) Spec() services.Spec { return s.spec }

// Where names the model and its file's hash.
func (s *Service) Where() string { return fmt.Sprintf("%s (built in, sha256 %.12s)", Name, s.sum) }

// Close does nothing: the model is memory the service holds.
func (s *Service) Close() {}
