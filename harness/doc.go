// Package harness reads, checks and runs harness files: a program of agents
// written as YAML — its tools, its roles (system prompt, tools, terminal
// tool, limits) and the steps that run them — that `lloyal run FILE` runs.
// The research program `lloyal run` runs without a file is one too
// (builtin/research.yaml), and it is the only description of that program:
// the demo model's training transcripts and the benches read it through
// Program.StepPool.
//
// Load (or Parse) checks a file against its JSON Schema (Schema, `lloyal
// harness schema`) and then for what a schema cannot say (names that must
// match, files that must exist, a graph that must not loop), every problem
// with its line; File.With puts the profiles a model needs over it;
// File.Build makes a Program, its tools built and corpora open, which Run
// runs on an engine.Runtime.
//
// A tool entry is a command, a delegate to another role, an installed
// ability's tools, or one of the built-in tool kinds (kinds.go: one file
// and one line each), which say themselves how their tools are built,
// what the schema lists of them and what harness check checks.
package harness
