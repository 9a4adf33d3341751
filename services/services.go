// Package services holds a run's second models: a reranker, an embedder
// and a judge, each either a model file loaded here in a llama.cpp context
// of its own or a server's endpoint. The model the agents run is never a
// service. A tool reaches the run's services through its context (From)
// and reports progress while it scores; a harness file names them under
// `services:` and a tool entry picks one (`rerank: NAME`).
package services

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
)

// Kind is what a service does.
type Kind string

// Service kinds.
const (
	// Rerank scores passages against a query: a causal model's logit of
	// "yes" over "no" after a relevance question, or a server's
	// /v1/rerank.
	Rerank Kind = "rerank"
	// Embed turns texts into vectors: llama.cpp's pooled embeddings, or a
	// server's /v1/embeddings.
	Embed Kind = "embed"
	// Judge picks one of its labels for a text, with each label's
	// probability.
	Judge Kind = "judge"
)

// Kinds lists the kinds a harness file may name.
var Kinds = []Kind{Rerank, Embed, Judge}

// Spec describes one service, as a harness file's `services:` entry does.
type Spec struct {
	Name string
	Kind Kind
	// Model is the GGUF file (or ollama model name) to load here, or, with
	// Server, the model's name on the server.
	Model string
	// Server is the URL of a server that runs the service; empty: the
	// model runs here.
	Server string
	// Key goes to Server as a bearer token (only there): a Go program
	// sets it; lloyal run gives a harness file's service the user's
	// $LLOYAL_SERVICE_KEY_NAME (KeysFrom), never anything from the file.
	Key string
	// Labels are a judge's answers (at least two).
	Labels []string
	// Instruction says what a reranker or judge is asked; empty: the
	// kind's default.
	Instruction string
	// Context is a local service's context in cells (default 4,096); a
	// passage longer than the context allows is cut.
	Context int
	// Threads fixes a local service's CPU threads (0: the run's choice);
	// GPULayers is how many layers go to a GPU (nil: every layer that
	// fits, as for the main model).
	Threads   int
	GPULayers *int
}

// Check says what is wrong with s, naming the field.
func (s Spec) Check() error {
	switch {
	case s.Name == "":
		return errors.New("a service needs a name")
	case !s.Kind.valid():
		return fmt.Errorf("service %s: kind %q: use %s", s.Name, s.Kind, kindList())
	case s.Model == "":
		return fmt.Errorf("service %s: model: name the GGUF file to load (or, with server:, the model's name there)", s.Name)
	case s.Kind == Judge && len(s.Labels) < 2:
		return fmt.Errorf("service %s: a judge needs at least two labels (labels: [relevant, irrelevant])", s.Name)
	}
	seen := map[string]bool{}
	for _, l := range s.Labels {
		if strings.TrimSpace(l) == "" || seen[l] {
			return fmt.Errorf("service %s: label %q: labels must be distinct and not blank", s.Name, l)
		}
		seen[l] = true
	}
	return nil
}

func (k Kind) String() string { return string(k) }

func (k Kind) valid() bool {
	for _, v := range Kinds {
		if k == v {
			return true
		}
	}
	return false
}

func kindList() string {
	var s []string
	for _, k := range Kinds {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}

// Ranker scores documents against a query: higher is more relevant. Scores
// compare within one service (a local reranker's is a logit difference,
// 0 as likely relevant as not; a server's is its own scale, often a
// probability; an embedder's a cosine), never across services; progress,
// when not nil, is told as documents are scored.
type Ranker interface {
	Rank(ctx context.Context, query string, docs []string, progress func(done, total int)) ([]float64, error)
}

// Embedder turns texts into vectors of one length.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Judger picks one of its labels for a text.
type Judger interface {
	Judge(ctx context.Context, text string) (Verdict, error)
	Labels() []string
}

// Verdict is a judge's answer: the label it picked and, where the service
// says, each label's probability (renormalised over the labels).
type Verdict struct {
	Label string             `json:"label"`
	Probs map[string]float64 `json:"probs,omitempty"`
}

// Service is one opened service.
type Service interface {
	Spec() Spec
	// Where says where it runs, for the header and the trace: the model
	// file here, or the server's URL.
	Where() string
	Close()
}

// Set is a run's services by name.
type Set struct {
	byName map[string]Service
}

// ErrNoLlama refuses a service whose model runs here where no Opener for
// one was given.
var ErrNoLlama = errors.New("a service whose model runs here needs llama.cpp (llamaservice.Open); give it a server")

// Opener opens a service whose model runs here (llamaservice.Open): a
// parameter, so that this package, and what reads a Set, need no cgo.
type Opener func(Spec) (Service, error)

// Open opens every spec: a server's endpoint (Dial) or, with local, a
// model here. On an error what opened is closed.
func Open(ctx context.Context, specs []Spec, local Opener) (*Set, error) {
	s := &Set{byName: map[string]Service{}}
	for _, sp := range specs {
		if err := sp.Check(); err != nil {
			s.Close()
			return nil, err
		}
		if _, dup := s.byName[sp.Name]; dup {
			s.Close()
			return nil, fmt.Errorf("service %s is named twice", sp.Name)
		}
		var (
			svc Service
			err error
		)
		switch {
		case sp.Server != "":
			svc, err = Dial(ctx, sp)
		case local == nil:
			err = ErrNoLlama
		default:
			svc, err = local(sp)
		}
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("service %s: %w", sp.Name, err)
		}
		s.byName[sp.Name] = svc
	}
	return s, nil
}

// NewSet is a set of services opened elsewhere (a Go program's own).
func NewSet(svcs ...Service) *Set {
	s := &Set{byName: map[string]Service{}}
	for _, v := range svcs {
		s.byName[v.Spec().Name] = v
	}
	return s
}

// Names lists the services, sorted.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	var n []string
	for k := range s.byName {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Get is the service named name.
func (s *Set) Get(name string) (Service, bool) {
	if s == nil {
		return nil, false
	}
	v, ok := s.byName[name]
	return v, ok
}

// Describe names a service and where it runs, for the trace: "ranker
// (ranker.gguf)".
func (s *Set) Describe(name string) string {
	if v, ok := s.Get(name); ok {
		return name + " (" + v.Where() + ")"
	}
	return name
}

// Ranker is the service named name as a Ranker (a rerank service, or an
// embed service scoring by cosine with the query), with an error naming
// what is wrong when there is none.
func (s *Set) Ranker(name string) (Ranker, error) {
	if v, ok := s.Get(name); ok && v.Spec().Kind == Embed {
		if _, ok := v.(Embedder); ok {
			return rankerOf(v), nil // cosine with the query's embedding
		}
	}
	return as[Ranker](s, name, Rerank, "rerank or embed")
}

// Embedder is the service named name as an Embedder.
func (s *Set) Embedder(name string) (Embedder, error) { return as[Embedder](s, name, Embed, "embed") }

// Judge is the service named name as a Judger.
func (s *Set) Judge(name string) (Judger, error) { return as[Judger](s, name, Judge, "judge") }

// as is the service named name as a T, which it must be of kind k (want
// names the kinds that would do, for the error).
func as[T any](s *Set, name string, k Kind, want string) (T, error) {
	var zero T
	v, ok := s.Get(name)
	if !ok {
		return zero, fmt.Errorf("no service named %q (the run has: %s)", name, strings.Join(s.Names(), ", "))
	}
	t, ok := v.(T)
	if !ok || v.Spec().Kind != k {
		return zero, fmt.Errorf("service %s is a %s service, not %s", name, v.Spec().Kind, want)
	}
	return t, nil
}

// Close closes every service.
func (s *Set) Close() {
	if s == nil {
		return
	}
	for _, v := range s.byName {
		v.Close()
	}
	s.byName = nil
}

type setKey struct{}

// With is ctx carrying the run's services, for the tools it calls.
func With(ctx context.Context, s *Set) context.Context {
	return context.WithValue(ctx, setKey{}, s)
}

// From is the services ctx carries (nil when none).
func From(ctx context.Context) *Set {
	s, _ := ctx.Value(setKey{}).(*Set)
	return s
}

// Scorer is a reranker whose scores are logits of relevance (a local
// rerank service's) as the pool's relevance scorer (engine.Scorer, what a
// delegate's drift check and a search's focus read): 0 where the passage
// is no likelier relevant than not, rising to 1 (2·sigmoid(score) − 1
// above that). A call that fails, or takes more than ScoreTimeout (a
// delegate's check runs on the tick loop), is scored by fallback instead
// (nil: 0). Each Score is one Rank call: the scorer is for a few checks
// per call, not for ranking a corpus.
func Scorer(r Ranker, fallback engine.Scorer) engine.Scorer { return rankScorer{r, fallback} }

// ScoreTimeout bounds one Score of a Scorer.
const ScoreTimeout = 10 * time.Second

type rankScorer struct {
	r        Ranker
	fallback engine.Scorer
}

func (s rankScorer) Score(query, text string) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), ScoreTimeout)
	defer cancel()
	sc, err := s.r.Rank(ctx, query, []string{text}, nil)
	if err != nil || len(sc) != 1 || math.IsNaN(sc[0]) {
		if s.fallback != nil {
			return s.fallback.Score(query, text)
		}
		return 0
	}
	return max(0, 2/(1+math.Exp(-sc[0]))-1)
}

// KeyPrefix and ServerPrefix start the environment variables KeysFrom
// and ServersFrom read.
const (
	KeyPrefix    = "LLOYAL_SERVICE_KEY_"
	ServerPrefix = "LLOYAL_SERVICE_SERVER_"
)

// KeysFrom reads the keys of served services from an environment
// (os.Environ), by KeyName: LLOYAL_SERVICE_KEY_RANKER=KEY is the key of
// the service named ranker. Each goes to the server the person names for
// that service alone (Bind).
func KeysFrom(env []string) map[string]string { return byName(env, KeyPrefix) }

// ServersFrom reads the servers the person names for served services, by
// KeyName: LLOYAL_SERVICE_SERVER_RANKER=URL is where the service named
// ranker runs, whatever a harness file says.
func ServersFrom(env []string) map[string]string { return byName(env, ServerPrefix) }

func byName(env []string, prefix string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if name, is := strings.CutPrefix(k, prefix); ok && is && name != "" && v != "" {
			m[name] = v
		}
	}
	return m
}

// Bind gives served specs the person's servers and keys: a service's
// server is the person's (servers, by KeyName) where they name one, the
// harness file's otherwise, and its key (keys) goes only to a server the
// person named. A harness file from elsewhere names its own services'
// servers, and a service named like one of the person's would otherwise
// have been sent its key; a key withheld is said on warn.
func Bind(specs []Spec, keys, servers map[string]string, warn io.Writer) {
	for i, sp := range specs {
		if sp.Server == "" {
			continue // runs here
		}
		name := KeyName(sp.Name)
		if u := servers[name]; u != "" {
			specs[i].Server = u
			specs[i].Key = keys[name]
			continue
		}
		if keys[name] != "" {
			fmt.Fprintf(warn, "note: the harness file names the server %s for its service %s: $%s%s goes only to a server you name, so none is sent (set %s%s=%s to send it)\n", sp.Server, sp.Name, KeyPrefix, name, ServerPrefix, name, sp.Server)
		}
	}
}

// KeyName is a service's name as its key's variable ends: letters upper
// case, anything but a letter or a digit written _ ("my-ranker" →
// MY_RANKER).
func KeyName(service string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, service)
}
