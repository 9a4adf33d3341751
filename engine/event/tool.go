package event

// ProgressData is a tool:progress event's data when its tool cannot say
// the total: how far it is by its own count (which may be a fraction).
type ProgressData struct {
	Value float64 `json:"value"`
}

// FailedNote is the name (Role) of the tool:note by which a tool says its
// call failed while its agent still reads the failure as the call's result
// and goes on (an ability whose server crashed, hung or answered an
// error): the call shows as failed and counts as an error, as a tool:error
// does, without ending its agent.
const FailedNote = "failed"

// FollowUpNote names the pool:note by which a program says a pool answers
// a follow-up (the harness writes one per follow-up): readers tell the
// run's own steps from its follow-ups by it, and a follow-up's failure is
// its own, not the run's.
const FollowUpNote = "follow_up"

// Funnel is a tool:funnel event's data: one retrieval's stages. A first
// stage (BM25 over the corpus) finds candidates, a service scores them (a
// reranker), and the best are admitted within the tool's budget: what the
// agent reads.
type Funnel struct {
	Query string `json:"query"`
	// Scorer names what scored the candidates: the service's name and
	// where it runs.
	Scorer string `json:"scorer"`
	// Question, when set, is the agent's question: it was exploiting, and
	// a candidate's score is the lower of its scores against the query
	// and against the question.
	Question string `json:"question,omitempty"`
	// Candidates are the first stage's passages in its order, each with
	// its score there and the scorer's, and whether it was admitted.
	Candidates []FunnelPassage `json:"candidates"`
	// Limit and Budget bound what is admitted: passages, and bytes of
	// their text.
	Limit  int `json:"limit"`
	Budget int `json:"budget"`
	// Admitted is how many were; AdmittedBytes their text's size.
	Admitted      int `json:"admitted"`
	AdmittedBytes int `json:"admittedBytes"`
}

// FunnelPassage is one candidate of a Funnel.
type FunnelPassage struct {
	Path     string  `json:"path"`
	Lines    string  `json:"lines"`
	First    float64 `json:"first"` // the first stage's score
	Score    float64 `json:"score"` // the scorer's
	Bytes    int     `json:"bytes"`
	Admitted bool    `json:"admitted,omitempty"`
}

// Diverge is a pool:diverge event's data: best-of-N, one task's
// candidates (agents forked from the same point, decoded together to
// their terminal calls) and the one kept.
type Diverge struct {
	Task string `json:"task"`
	// By is what picked: "perplexity" (the lowest), or a judge service's
	// name.
	By         string             `json:"by"`
	Candidates []DivergeCandidate `json:"candidates"`
	// Kept is the kept candidate's agent id.
	Kept int `json:"kept"`
}

// DivergeCandidate is one candidate of a Diverge.
type DivergeCandidate struct {
	Agent   int     `json:"agent"`
	Outcome Outcome `json:"outcome"`
	Ppl     float64 `json:"ppl,omitempty"`
	// Score is the judge's, where a judge picked.
	Score float64 `json:"score,omitempty"`
}
