// Package research holds the pieces of lloyal's research program that the
// harness builds it from, and the built-in handbook it researches. The
// program itself — its roles' prompts, tools, steps and profiles — is one
// harness file, harness/builtin/research.yaml, and nothing else: a planner
// splits a task into questions (PlanTool, Clauses), researchers answer them
// at once over a corpus, their tools narrowed for a model that copies
// better than it writes (QuestionQueries, HitReads, SubQuestions), and a
// publisher saves the report as a note and reports (GroundedNote,
// PublisherReport). Fitted sizes them to a small context; Catalogue puts
// installed abilities in a role's prompt.
package research
