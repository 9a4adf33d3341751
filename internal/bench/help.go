package bench

// The long help of the benches whose workloads take explaining, kept with
// the code that runs them (lloyal bench NAME --help prints them).

// ServerHelp is lloyal bench server's.
const ServerHelp = `N agents share a --spine-token system prompt and each write --tokens tokens
of free text (no tools), for each N of --agents: first on the local backend
(llama.cpp in this process, one batched decode per tick), then on --server
(one request per agent, all in flight at once, the spine a byte-identical
prefix of every prompt), three times for each N: "(again)" sends the same
prompts, which the server may find whole in its cache, tasks included;
"(spine cached)" gives the agents new tasks of as many tokens, so only the
spine can be cached: the row to set beside the local spine-cached one.

Columns: wall time, aggregate tokens/s (tokens written over wall time), the
prompt tokens the backend was given, and how many of them it really
evaluated: locally the spine once plus each agent's own task (the rest is
forked); on a server what it reports (OpenAI usage's cached tokens,
llama-server's timings; ollama does not say, its prompt time is shown).

The local model is the generated tiny model unless --local-model names a
GGUF file; the spine is sized with its tokenizer. Load the same model into
the server for a like-for-like row.`

// AgentsHelp is lloyal bench agents'.
const AgentsHelp = `N agents share a --spine-token system prompt; each makes --turns tool
calls, every call writing a note of --call characters (forced by grammar, so
every model does the same work) and reading a --result-token result, then
reports. Locally a result is appended to the agent's branch, in one cache
every branch shares and with a stream per branch (lloyal run --streams),
the one lloyal run's default (--streams auto) picks for this loop first,
marked "(auto's pick)"; a server is sent the agent's whole
conversation each turn and must find its prefix again in its cache.

Each agent is given the same cells on every row: the spine, its loop
with notes sized at twice the tokens handbook text takes, and the soft
limit (a stream's share; the server is asked for that context, so start
it with a slot per agent, OLLAMA_NUM_PARALLEL=N, for memory like for like).

Columns: wall time, tokens written (and per turn), aggregate tokens/s, the
prompt tokens the backend was given and how many it evaluated (locally what
was prefilled; on a server what it reports), and peak memory: this
process's resident peak for the local rows, the resident sum of this
machine's ollama or llama-server processes for the server's.`
