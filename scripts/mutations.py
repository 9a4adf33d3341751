#!/usr/bin/env python3
"""The mutation table of engine/INVARIANTS.md, applied: each row's change is
made to the source, the test that should catch it is run, and the file is
restored (even when interrupted). Prints "caught" or "SURVIVED" per row, and
"STALE" for a row whose code has moved (mend the row).

    eval "$(scripts/cgo-env.sh)"; scripts/mutations.py [ROW ...]
"""
import os, subprocess, sys
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
rows = [
 ("engine/endturn.go", "case pr.Critical && p.stops.mayStop():", "case pr.Critical:", "./engine", "TestCriticalKillsOnePerTickWhenAgentsCallTools/in_loop"),
 ("engine/stops.go", "case pr.Critical && st.mayStop():", "case pr.Critical:", "./engine", "TestCriticalKillsOnePerTickAndRecovers/in_loop"),
 ("engine/stops.go", "case pr.Critical && st.mayStop():", "case pr.Critical && st.mayStop() && !st.midTerminal(a):", "./engine", "TestCriticalKillSalvagesAReportInProgress"),
 ("engine/commands.go", 'if c.kind == "cancel" && a.outcome == event.Running {', 'if c.kind == "cancel" && a.outcome == event.Running && a.status != event.StatusThinking {', "./engine", "TestCancelAThinkingAgent"),
 ("engine/outcome.go", "\tp.emit(ev)\n", "\tp.emit(ev)\n\tif o == event.Recovered {\n\t\tp.emit(event.Event{Type: event.AgentReturn, Agent: a.ID})\n\t}\n", "./engine", "TestRecoveredAgentsEmitOnlyRecovered"),
 ("engine/endturn.go", "\tif call.Tool == p.tools.terminal {\n\t\tif why", "\tif call.Tool == p.tools.terminal && !e.spec.Protected {\n\t\tif why", "./engine", "TestTerminalToolIsNeverAuthBlocked"),
 ("engine/admission.go", "\t\tif need > room {\n", "\t\tif false {\n", "./engine", "TestExtendWaitsForHeadroom"),
 ("engine/admission.go", "if errors.Is(err, ErrNoBranch) && ad.holdsBranches() {", "if false && errors.Is(err, ErrNoBranch) && ad.holdsBranches() {", "./engine/llamabackend", "TestAgentsBeyondTheSlotsWait"),
 ("engine/decode.go", "case !a.extracting && tk.used.of(a.branch) > pr.Remaining-pr.HardLimit:", "case false:", "./engine/llamabackend", "TestLoadNeverEndsAnAgentWithAFullCache"),
 ("engine/pool.go", " && !errors.Is(p.orch.err, ErrFinishingUp)", "", "./engine", "TestFinishingUpIsNoOrchestratorError"),
 ("engine/dispatch.go", "\tp.admit.queueResult(a, pc.call.Tool, pc.call.ID, body, \"toolResult\")\n", "\ta.book(HistoryEntry{Tool: pc.call.Tool, Args: pc.call.Args, CallID: pc.call.ID, Outcome: \"result\"})\n\tp.admit.queueResult(a, pc.call.Tool, pc.call.ID, body, \"toolResult\")\n", "./engine", "TestAttendedOnlyOnceAdmitted"),
 ("engine/endturn.go", "if why := t.returnRefusal(a, call.Args, false); why != \"\" {", "if why := t.returnRefusal(a, call.Args, false); false && why != \"\" {", "./engine", "TestReturnRules"),
 ("engine/dispatch.go", "if h := pc.entry.spec.AfterExecute; h != nil && c.err == nil {", "if h := pc.entry.spec.AfterExecute; false && h != nil && c.err == nil {", "./engine", "TestAfterExecute"),
 ("engine/stops.go", " && p.policy().OnStall(a) == StallNudge", "", "./engine", "TestPolicyMethods/OnStall"),
 ("engine/dispatch.go", "explore: p.policy().Explore(a, pct, p.elapsed(a))", "explore: pct > 40", "./engine", "TestPolicyMethods/Explore"),
 ("engine/recovery.go", "if ok, why := p.policy().OnRecovery(a, reason); !ok {", "if ok, why := p.policy().OnRecovery(a, reason); false && !ok {", "./engine", "TestPolicyMethods/OnRecovery"),
 ("engine/endturn.go", "if name, msg := p.guard(a, e, call); msg != \"\"", "if name, msg := p.guard(a, e, call); false && msg != \"\"", "./engine", "TestGuards"),
 ("engine/dispatch.go", "if ds.replayed(pc) {", "if false && ds.replayed(pc) {", "./internal/cli", "TestRerunIsTokenForToken"),
 ("engine/forced.go", "return r != nil && r.Forking()", "return false && r != nil && r.Forking()", "./internal/cli", "TestForkReplacesAResult"),
 ("engine/record.go", "a.surprisedBy(m, sm)", "a.surprisedBy(m, m+0*sm)", "./engine/llamabackend", "TestPerplexityAgreesWithTracedLogprobs"),
 ("engine/admission.go", "ad.queueFollowUp(a, text) // it writes once it has read this too\n\t\t\t\t\tcontinue", "ad.queueFollowUp(a, text) // it writes once it has read this too", "./engine", "TestAfterAdmitFollowUp"),
 ("engine/dispatch.go", "if h := pc.entry.spec.AfterAdmit; h != nil {", "if h := pc.entry.spec.AfterAdmit; false && h != nil {", "./engine", "TestAfterAdmitFollowUp"),
 ("tools/search.go", "if sc == nil || ag == nil {", "if true {", "./tools", "TestSearchToolFocusesWithThePoolsScorer"),
 ("tools/subtasks.go", "case checkDrift && sc.Score(t, callerTask) <= 0:", "case false:", "./tools", "TestDelegateDropsEchoesAndDrift"),
 ("engine/llamacpp/llama/forced.cpp", "pos[1].type == LLAMA_GRETYPE_CHAR_ALT ||", "false ||", "./engine/llamacpp/llama", "TestForcedText"),
 ("engine/llamabackend/forced.go", "\t\ttoks = toks[:len(toks)-1]", "\t\ttoks = toks[:len(toks)-0]", "./engine/llamabackend", "TestForcedTokensAreTheModelsOwn"),
 ("engine/llamacpp/kv/store.go", "\t\t\tlast[i] = len(s.toks) - 1\n", "\t\t\tlast[i] = len(s.toks) - 1 - len(st.Forced)\n", "./engine/llamacpp/kv", "TestForcedTokensInOneStep"),
 ("engine/record.go", "\ta.turnIDs = append(a.turnIDs, toks...)", "", "./engine/llamabackend", "TestJumpForwardInARun"),
 ("fold/apply.go", "n := max(1, e.Counts[id])", "n := 1", "./engine/llamabackend", "TestJumpForwardInARun"),
 ("engine/decode.go", "room := min(maxForced, d.be.NBatch()-1, p.spec.MaxTurnTokens-a.turnTokens-1)", "room := min(maxForced, d.be.NBatch()-1)", "./engine/llamabackend", "TestJumpForwardKeepsTheTurnLimit"),
 ("engine/diverge.go", "\t\tif c.Ppl < cands[best].Ppl {", "\t\tif c.Ppl > cands[best].Ppl {", "./engine", "TestBestOfKeepsTheLowestPerplexity"),
 ("engine/diverge.go", "\t\t\ta.discarded = true\n", "", "./engine", "TestBestOfKeepsTheLowestPerplexity"),
 ("engine/diverge.go", "\t\tif !r.Discarded {", "\t\tif true {", "./app", "TestTheReportIsTheKeptCandidates"),
 ("engine/images.go", "\t\tcase !p.rt.canSee():", "\t\tcase true:", "./engine/serverbackend", "TestChatShowsAToolsImage"),
 ("engine/salvage.go", "if m := re.FindStringSubmatch(call); m == nil && field != \"\" {", "if m := re.FindStringSubmatch(call); m == nil && false {", "./engine", "TestSalvageTheSchemasOneField"),
 ("tools/search.go", "\t\t\tscores[j] = min(scores[j], sc[j])", "\t\t\tscores[j] = max(scores[j], sc[j])", "./tools", "TestSearchFunnelExploits"),
 ("tools/search.go", "sort.SliceStable(order, func(i, j int) bool { return scores[order[i]] > scores[order[j]] })", "sort.SliceStable(order, func(i, j int) bool { return scores[order[i]] < scores[order[j]] })", "./tools", "TestAdmit"),
 ("engine/images.go", "if !ok || p.rt.tb != nil || !reader.CanSee() {", "if ok || true {", "./internal/cli", "TestAModelHereSeesAnImage"),
 ("engine/images.go", "if i < 0 && p.rt.opts.Replay != nil {", "if false {", "./internal/cli", "TestAModelHereSeesAnImage"),
 ("engine/llamacpp/kv/store.go", "\t\ts.cells += im.N\n", "", "./engine/llamacpp/kv", "TestPrefillImages"),
 ("engine/llamacpp/kv/store.go", "\t\tif err := s.ctx.DecodeImage(im.Embd, im.N, int32(b.pos), b.seq, im.NonCausal); err != nil {\n\t\t\tundo()\n", "\t\tif err := s.ctx.DecodeImage(im.Embd, im.N, int32(b.pos), b.seq, im.NonCausal); err != nil {\n", "./engine/llamacpp/kv", "TestPrefillImages"),
 ("harness/build.go", "\t\tif !p.offered(name) {\n\t\t\tcontinue", "\t\tif false {\n\t\t\tcontinue", "./harness", "TestStageAttachments"),
 ("trace/attachments.go", "if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != sum {", "if got := sha256.Sum256(data); len(got) == 0 {", "./trace", "TestAttachmentsBesideTheTrace"),
 ("services/llamaservice/local.go", "err == nil && cross {", "err == nil && false && cross {", "./services/llamaservice", "TestLocalCrossEncoderRerank"),
 ("engine/llamabackend/embed.go", "probs := arch == \"qwen3\" &&", "probs := false && arch == \"qwen3\" &&", "./engine/llamabackend", "TestCrossEncoderRanks"),
 ("engine/llamacpp/llama/context.go", "\tcase micro && !flash && !p.Embeddings:\n", "\tcase false:\n", "./engine/llamacpp/llama", "TestMicroBatch"),
 ("engine/llamacpp/llama/context.go", "\tcase micro && !flash && !p.Embeddings:\n", "\tcase micro && !flash:\n", "./engine/llamacpp/llama", "TestMicroBatch"),
 ("abilities/pages.go", "\tfor range max {", "\tfor range max + 100 {", "./abilities", "TestToolListBounded"),
 ("services/llamaservice/local.go", "if err := l.turn.Acquire(ctx, 1); err != nil {", "if err := l.turn.Acquire(context.Background(), 1); err != nil {", "./services/llamaservice", "TestLocalWaitEndsWithItsContext"),
 ("engine/llamacpp/llama/context.go", "p.native(!m.Offload().OnGPU() && m.causal())", "p.native(!m.Offload().OnGPU())", "./engine/llamacpp/llama", "TestMicroBatch"),
 ("engine/serverloop.go", "\tsv.sent++\n\tg.seq = sv.sent\n", "\tg.seq++\n", "./engine", "TestAnAbortedTurnsLateEndIsNobodys"),
 ("services/server.go", "\t\tKeyFrom: \"$\" + KeyPrefix + KeyName(sp.Name),\n", "", "./services", "TestServerErrorsNameTheService/refused"),
 ("abilities/toollist.go", "if err == nil && len(b) > maxToolSchema {", "if false {", "./abilities", "TestToolSchemasBounded"),
 ("engine/llamacpp/llama/context.go", "\tif MicroBatch*row > maxScores {", "\tif false {", "./engine/llamacpp/llama", "TestMicroBatch"),
 ("engine/tool.go", "return min(max(e.Delay, 0), MaxRetryDelay)", "return max(e.Delay, 0)", "./engine", "TestAServersRetryAfterIsBounded"),
 ("services/server.go", "for _, tok := range toks[:min(len(toks), judgeTokens)] {", "for _, tok := range toks {", "./services", "TestJudgeReadsItsTurnsTokensOnly"),
 ("internal/rerun/reexec.go", "\tcase recorded != \"\" && flag == \"\":\n", "\tcase false:\n", "./internal/rerun", "TestTheCorpusIsTheCommands"),
 ("internal/rerun/authority.go", "p != \"\" && f.Model != \"\"", "p != \"\"", "./internal/rerun", "TestTheModelLoadedIsTheModelChecked"),
 ("internal/rerun/record.go", "c.Projector != \"\" && c.ProjectorSHA256 == \"\"", "false", "./internal/rerun", "TestTheModelLoadedIsTheModelChecked"),
 ("abilities/start.go", "\t\tif !r.Enabled {\n", "\t\tif r == nil {\n", "./abilities", "TestCheckEnabled"),
 ("internal/runconfig/runconfig.go", "want != \"\" && want != hash", "false", "./internal/runconfig", "TestTheTemplateReadIsTheTemplateChecked"),
 ("tools/corpus.go", "\t\t\tif len(texts) == maxCorpusFiles {", "\t\t\tif false {", "./tools", "TestCorpusBounded"),
 ("tools/corpus.go", "\t\tif read > maxCorpusBytes {", "\t\tif false {", "./tools", "TestCorpusBounded"),
 ("harness/build.go", "b, err = regular.ReadFile(path, maxSystemFile)", "b, err = regular.ReadFile(path, 1<<40)", "./harness", "TestAHarnessReadsItsFilesToABound"),
 ("harness/check.go", "\tif len(files) > maxEachFiles {", "\tif false {", "./harness", "TestAHarnessReadsItsFilesToABound"),
 ("internal/childproc/childproc.go", "\tcmd.Cancel = func() error { KillGroup(cmd); return nil }\n", "", "./internal/bench", "TestRunOwned"),
 ("engine/chat/jinja/limits.go", "\tif l.depth++; l.depth > maxDepth {", "\tif l.depth++; l.depth > 1<<40 {", "./engine/chat/jinja", "TestRenderIsBounded/recursion"),
 ("engine/llamacpp/llama/shim.c", "if (isinf(arr.data[arr.selected].logit) && arr.data[arr.selected].logit < 0) {", "if (0) {", "./engine/llamacpp/llama", "TestARefusedTokenIsAnError"),
 ("engine/llamacpp/llama/sampler.go", "\tif p.RepeatLastN > MaxRepeatLastN {", "\tif false {", "./engine/llamacpp/llama", "TestRepeatWindowBounded"),
 ("engine/llamacpp/llama/context.go", "if C.llama_get_memory(c) == nil && !p.Embeddings {", "if false {", "./engine/llamacpp/llama", "TestAModelWithoutACacheIsRefused"),
 ("engine/llamacpp/llama/llama.go", "\tif C.llama_vocab_type(m.vocab) == C.LLAMA_VOCAB_TYPE_NONE {", "\tif false {", "./engine/llamacpp/model", "TestHostileHyperparametersAreRefused/no_vocabulary"),
 ("engine/llamacpp/model/hparams.go", "\t\tif _, isStrings := v.([]string); !isStrings {\n\t\t\treturn damaged(\"tokenizer.ggml.merges\"", "\t\tif _, isStrings := v.([]string); false && !isStrings {\n\t\t\treturn damaged(\"tokenizer.ggml.merges\"", "./engine/llamacpp/model", "TestHostileHyperparametersAreRefused/merges_not_strings"),
 ("internal/gguf/read.go", "\t\tif !isU32 {\n", "\t\tif !isU32 && false {\n", "./internal/gguf", "TestReadErrors"),
 ("engine/llamacpp/llama/projkeys.go", "want != \"\" && got != want", "false", "./engine/llamacpp/llama", "TestAProjectorClipWouldAbortOnIsRefused"),
 ("engine/llamacpp/llama/trigger.go", "C.size_t(t.longest-1)", "C.size_t(0)", "./engine/llamacpp/llama", "TestAWaitingGrammarKeepsATail"),
 ("engine/llamacpp/llama/trigger.go", "from := max(0, last-(len(w)-1))", "from := last", "./engine/llamacpp/llama", "TestALazyGrammarWaitsThroughALongTurn"),
 ("engine/llamacpp/llama/trigger.cpp", "            llama_grammar_accept_token(*g, tok, buffer.substr(from, tok_end - from));", "            (void)from;", "./engine/llamacpp/llama", "TestALazyGrammarWaitsThroughALongTurn"),
 ("harness/aliases.go", "if added += s; added > maxAliasNodes {", "if added += s; false && added > maxAliasNodes {", "./harness", "TestAliasesAreBounded"),
 ("tools/corpus.go", "if entries++; entries > maxCorpusEntries {", "if entries++; false && entries > maxCorpusEntries {", "./tools", "TestCorpusBounded"),
 ("engine/llamacpp/llama/llama.go", "if c.adds && (c.tok < 0 || int(c.tok) >= m.nVocab) {", "if false && c.adds {", "./engine/llamacpp/model", "TestHostileHyperparametersAreRefused/adds_a_SEP_token_it_lacks"),
 ("internal/rerun/reexec.go", "\treturn commandPath(run.Harness, flag,", "\treturn commandPath(\"\", flag,", "./internal/rerun", "TestTheHarnessIsTheCommands"),
 ("abilities/tasks.go", "if ct != \"text/event-stream\" || resp.StatusCode/100 != 2 {", "if ct == \"application/json\" {", "./abilities", "TestAnErrorAnswerIsBounded"),
 ("services/server.go", "if t.Logprob <= 0 && !math.IsNaN(t.Logprob) {", "if true {", "./services", "TestJudgesProbabilitiesAreFinite"),
 ("engine/diverge.go", "sc != nil && len(sc) != len(ok) || !finite(sc) {", "sc != nil && len(sc) != len(ok) {", "./engine", "TestBestOfPicker"),
 ("engine/results.go", "if len(p.attachments)-p.given >= MaxToolFiles ||", "if false ||", "./engine", "TestToolFilesAreBoundedAndNeverAGivenName"),
 ("engine/results.go", "if slices.ContainsFunc(p.attachments[:p.given], func(g Attachment) bool { return g.Name == f.Name }) {", "if false && slices.ContainsFunc(p.attachments, func(Attachment) bool { return true }) {", "./engine", "TestToolFilesAreBoundedAndNeverAGivenName"),
 ("services/embedrank.go", "\t\tif len(v) != len(q) {\n\t\t\tstale, texts = append(stale, i)", "\t\tif len(v) < 0 {\n\t\t\tstale, texts = append(stale, i)", "./services", "TestAStaleCachedVectorIsEmbeddedAgain"),
 ("internal/runconfig/runconfig.go", "named := c.Server == a.Server || c.Server == a.EnvServer || serverbackend.SameOrigin(c.Server, a.EnvServer)", "named := true", "./internal/runconfig", "TestDecideTakesAuthorityOnlyFromTheCommand"),
 ("engine/llamacpp/llama/sampler.go", "if err := jsondepth.Check(schemaJSON, jsondepth.Converter); err != nil {", "if err := jsondepth.Check(schemaJSON, jsondepth.Converter); false && err != nil {", "./engine/llamacpp/llama", "TestADeepSchemaIsRefused"),
 ("abilities/toollist.go", "err = jsondepth.Check(b, jsondepth.Tool)", "_ = jsondepth.Check(b, jsondepth.Tool)", "./abilities", "TestToolSchemasBounded"),
 ("engine/schemacheck.go", "if err := jsondepth.Check(schema, jsondepth.Tool); err != nil {", "if err := jsondepth.Check(schema, jsondepth.Tool); false && err != nil {", "./engine", "TestCheckSchema"),
 ("services/services.go", "\t\t\tspecs[i].Key = keys[name]\n\t\t\tcontinue\n\t\t}\n", "\t\t\tspecs[i].Key = keys[name]\n\t\t\tcontinue\n\t\t}\n\t\tspecs[i].Key = keys[name]\n", "./services", "TestKeysGoOnlyToTheServersThePersonNames"),
 ("engine/pool.go", "\t\tp.attachments = append(p.attachments[:p.given:p.given], ci.attach[:ci.given]...)\n", "\t\tp.attachments = append(p.attachments[:p.given:p.given], ci.attach...)\n\t\tci.attach = ci.attach[:ci.given]\n", "./engine", "TestANestedPoolCountsItsCallersToolFiles"),
 ("harness/check.go", "if n == \"LLOYAL_API_KEY\" || n == \"LLOYAL_HEADERS\" || n == \"LLOYAL_SERVER\" ||", "if false && n == \"LLOYAL_SERVER\" ||", "./harness", "TestBadHarnessFiles/lloyal's_key_given_to_a_command"),
 ("engine/tool.go", "\t\t\t\t\tif strings.EqualFold(k, f) {", "\t\t\t\t\tif false && strings.EqualFold(k, f) {", "./engine", "TestTypedArgumentsMatchExactly"),
 ("internal/ui/surprisal.go", "c := string(levels[int(min(max(surprisal(s), 0), float64(len(levels)-1)))])", "c := string(levels[min(int(surprisal(s)), len(levels)-1)])", "./internal/ui", "TestHostileNumbersAreBounded"),
 ("internal/ui/markdown.go", "\tmd = sanitize(controlRefs.ReplaceAllStringFunc(md, defuseRef))", "\tmd = sanitize(md)", "./internal/ui", "TestMarkdownReferencesStayEscaped"),
 ("internal/ui/render.go", "\treturn strings.Split(ansi.Hardwrap(l, w, true), \"\\n\")", "\tvar out []string\n\tfor ansi.StringWidth(l) > w {\n\t\thead := ansi.Truncate(l, w, \"\")\n\t\tout = append(out, head)\n\t\tl = l[len(head):]\n\t\tif head == \"\" {\n\t\t\tbreak\n\t\t}\n\t}\n\treturn append(out, l)", "./internal/ui", "TestWrapKeepsEveryCharacter"),
 ("internal/ui/approval.go", "fit(\"from \"+oneLine(src), w)", "fit(\"from \"+src, w)", "./internal/ui", "TestAToolsSourceIsEscaped"),
 ("abilities/manifest.go", "\tif !trace.PlainVersion(m.Version) {", "\tif false && !trace.PlainVersion(m.Version) {", "./abilities", "TestManifestRefusals"),
 ("tools/files.go", "\t\t\tif err := ctx.Err(); err != nil {\n\t\t\t\treturn nil, err\n\t\t\t}\n\t\t\tfor i, l := range d.Lines {", "\t\t\tfor i, l := range d.Lines {", "./tools", "TestGrep"),
 ("engine/dispatch.go", "ci.progress = coalesce.New(progressEvery,", "ci.progress = coalesce.New(0,", "./harness", "TestCommandProgressAndProtection"),
 ("harness/command.go", "if bad == \"\" && !ended && strings.HasPrefix(v, \"-\") && !strings.HasPrefix(a, \"-\") {", "if false {", "./harness", "TestCommandArgv"),
 ("internal/ui/approval.go", "\t\ttext := indent(sanitize(a.text), \"  \")", "\t\ttext := renderMarkdown(a.text, w, \"notty\")", "./internal/ui", "TestApprovalShowsHTMLArguments"),
 ("internal/coalesce/coalesce.go", "\tif wait := l.every - time.Since(l.last); wait > 0 {\n\t\tl.pending = &v", "\tif wait := l.every - time.Since(l.last); wait > 0 && false {\n\t\tl.pending = &v", "./internal/coalesce", "TestLatest"),
 ("internal/bench/rerank.go", "holdsAny(h.Passage(), q.Answers)", "holdsAny(h.Text, q.Answers)", "./internal/bench", "TestBenchRerankReadsWholePassages"),
 ("internal/bench/rerank.go", "docs[i] = h.Passage()", "docs[i] = h.Text", "./internal/bench", "TestBenchRerankReadsWholePassages"),
 ("engine/dispatch.go", "ci.progress = coalesce.New(progressEvery,", "ci.progress = coalesce.New(0,", "./engine", "TestToolContext"),
 ("engine/dispatch.go", "\tdefer pc.info.progress.Finish()\n", "", "./engine", "TestToolContext"),
 ("engine/tool.go", "\tcase n <= maxCallNotes:\n\t\treturn true", "\tcase n > 0:\n\t\treturn true", "./engine", "TestToolContext"),
 ("internal/runconfig/runconfig.go", "\tif u != c.Server { // the note hides", "\tif false { // the note hides", "./internal/runconfig", "TestWithheldKeyNoteKeepsPasswordsOut"),
 ("engine/results.go", "|| p.toolBytes+len(f.Data) > MaxToolFileBytes {", "{", "./engine", "TestToolFilesAreBoundedInBytes"),
 ("abilities/mcp.go", "\tgo s.stopDeaf(cctx, returned, c)", "", "./abilities", "TestADeafServerEndsOnlyTheCall"),
 ("approvals/prompt.go", "lp.b.Close(\"input closed before anyone answered\")", "lp.b.Withdraw(0, \"input closed before anyone answered\")", "./approvals", "TestLinePrompterInputClosedDeniesLaterRequests"),
 ("approvals/prompt.go", "\t\tselect {\n\t\tcase lp.queue <- r:\n\t\tdefault:", "\t\tselect {\n\t\tcase lp.queue <- r:\n\t\t}\n\t\tif false {", "./approvals", "TestLinePrompterQueueFullDenies"),
 ("internal/gguf/read.go", "\tif nKV > maxKV {", "\tif false {", "./internal/gguf", "TestReadBoundsAHugeFilesHeader"),
 ("internal/gguf/read.go", "\tif nTensors > maxTensors {", "\tif false {", "./internal/gguf", "TestReadBoundsAHugeFilesHeader"),
 ("trace/play.go", "min(float64(e.At-last)/speed, float64(maxPause))", "float64(e.At-last)/speed", "./trace", "TestPlayCutsLongPauses"),
 ("services/embedrank.go", "b, err := regular.ReadFile(r.file(text), 4*maxCachedDims)", "b, err := regular.ReadFile(r.file(text), 4*maxCachedDims)\n\tb, err = os.ReadFile(r.file(text))", "./services", "TestACachedVectorIsReadOnlyFromARegularFile"),
 ("engine/serverbackend/client.go", "\t\tif listed++; listed <= maxNamesSaid {", "\t\tif listed++; true {", "./engine/serverbackend", "TestDialReadsAHugeModelListOneAtATime"),
 ("engine/serverbackend/client.go", "&models, modelsBytes)", "&models, 1<<30)", "./engine/serverbackend", "TestDialReadsAHugeModelListOneAtATime"),
 ("app/sinks.go", "\tout := r.out\n", "\tout := r.o.Stdout\n", "./app", "TestAStalledStdoutHoldsNeitherTheRunNorItsTrace"),
 ("harness/command.go", "\tif err := childproc.Reap(cmd); err != nil {", "\tif err := error(nil); err != nil {", "./harness", "TestCommandDiesWithLloyal"),
 ("harness/build.go", "\t\t\tcase <-rt.Finishing():\n", "\t\t\tcase <-make(chan struct{}):\n", "./harness", "TestFinishingUpEndsTheWaitForAFollowUp"),
 ("engine/pressure.go", "return wordsFor(min(room, p.spec.MaxTurnTokens-callWrapper))", "return wordsFor(room)", "./engine", "TestBudgetNudgesOnePerTick"),
 ("harness/build.go", "\tif p.o.Input == \"\" && f.asksForInput() {", "\tif false {", "./harness", "TestAMissingInputIsRefused"),
 ("harness/load.go", "\tcase \"multipleOf\":", "\tcase \"multipleOf-\":", "./harness", "TestBadHarnessFiles"),
 ("harness/load.go", "\t\treturn ` (a {{placeholder}} must be quoted: task: \"{{input}}\")`", "\t\treturn \"\"", "./harness", "TestBadHarnessFiles"),
 ("harness/load.go", "\tout = dedentedRoleKeys(doc, tree, kept)", "\tout = kept", "./harness", "TestBadHarnessFiles"),
 ("harness/load.go", "\t\tif !slices.Contains(keys, name) || !slices.ContainsFunc(out, about) {", "\t\tif !slices.Contains(keys, name) {", "./harness", "TestARoleNamedLikeARolesKey"),
 ("harness/load.go", "\t\t\t\t\tif _, there := f.Roles[role]; !there {", "\t\t\t\t\tif _, there := f.Roles[role]; false && !there {", "./harness", "TestBadHarnessFiles"),
 ("tools/search.go", "scored += fmt.Sprintf(\", the best %d reranked\", reranked)", "scored += fmt.Sprintf(\", the best %d reranked\", min(FirstStageK, len(c.Chunks))+0*reranked)", "./tools", "TestSearchFunnel"),
 ("fold/state.go", "\t\tif len(s.Agents) >= MaxAgents {", "\t\tif false {", "./fold", "TestStateBoundsWhatATraceNames"),
 ("fold/state.go", "\tif n := len(s.Approvals); n > MaxApprovals {", "\tif n := len(s.Approvals); false && n > MaxApprovals {", "./fold", "TestStateBoundsWhatATraceNames"),
 ("fold/state.go", "\tif len(out) < len(s.Agents) {", "\tif false {", "./fold", "TestRosterHoldsEveryAgentOnce"),
 ("internal/capped/capped.go", "\tif c.left <= 0 {\n\t\treturn 0, c.over", "\tif c.left < 0 {\n\t\treturn 0, c.over", "./internal/capped", "TestReader"),
 ("engine/servercells.go", "\tcase c.grownBytes >= minGrowth && c.grownTokens > 0:", "\tcase false:", "./engine", "TestServerCellsRateLeavesOutWhatTheServerAdds"),
 ("fold/apply.go", "\t\tif how := salvagedFrom(d.Source); how != \"\" {", "\t\tif how := salvagedFrom(d.Source); false && how != \"\" {", "./fold", "TestSalvagedReportLine"),
 ("tools/search.go", "\tif fr, ok := r.(FirstStageReranker); ok {", "\tif fr, ok := r.(FirstStageReranker); false && ok {", "./tools", "TestSearchFunnelGivesTheFirstStage"),
 ("harness/build.go", "\t\t\t\tif _, blends := rk.(tools.FirstStageReranker); !blends {", "\t\t\t\tif _, blends := rk.(tools.FirstStageReranker); true || !blends {", "./harness", "TestABlendingRankerAndUnranked"),
 ("harness/build.go", "\tif t.Rerank != \"\" && !p.o.Unranked {", "\tif t.Rerank != \"\" {", "./harness", "TestABlendingRankerAndUnranked"),
 ("internal/demoranker/model.go", "\t\t\tt := (1 - m.Params.Self) * m.trans[v][w]", "\t\t\tt := 0.0", "./internal/demoranker", "TestATranslationRanksAParaphrase"),
 ("internal/demoranker/model.go", "\tif 2*known < len(docs) {", "\tif false {", "./internal/demoranker", "TestRankAfterBlendsWithTheFirstStage"),
 ("internal/demoranker/model.go", "\t\tif !m.asked[w] {", "\t\tif true {", "./internal/demoranker", "TestTheProductsNameScoresNothing"),
 ("tools/search.go", "\t\t\t\tranker = nil // searched as without a reranker, below", "\t\t\t\treturn nil, err", "./tools", "TestSearchFunnelDeclined"),
 ("tools/grounding.go", "\tg.rankClaims(question, says, score)\n", "", "./tools", "TestClaimsRankedByTheDemoReranker"),
 ("tools/grounding.go", "\t\tscore[i] *= 1 + claimBoost*max(x, 0)/best", "\t\tscore[i] += claimBoost * max(x, 0) / best", "./tools", "TestClaimsRankedByTheDemoReranker"),
 ("tools/search.go", "\t\t\t\tranker = nil // searched as without a reranker, below", "\t\t\t\tranker, r = nil, nil", "./tools", "TestADeclinedSearchKeepsItsReranker"),
 ("tools/grounding.go", "errors.Is(err, ErrDeclined) {\n\t\treturn\n\t}\n\tg.claimRanker = r", "errors.Is(err, ErrDeclined) \u0026\u0026 false {\n\t\treturn\n\t}\n\tg.claimRanker = r", "./tools", "TestClaimsRankedByTheDemoReranker"),
 ("harness/build.go", "\t\t\tc.g.RankClaimsBy(fr)\n", "\t\t\t_ = fr\n", "./harness", "TestABlendingRankerAndUnranked"),
 ("internal/research/narrow.go", "best, worth := -1, math.Inf(-1)", "best, worth := -1, -1.0", "./internal/research", "TestNextRead"),
 ("internal/research/narrow.go", "w -= (1 - openedWeight) * math.Abs(w)", "w *= openedWeight", "./internal/research", "TestNextRead"),
]
only = set(sys.argv[1:])
survived = False
for i, (f, old, new, pkg, test) in enumerate(rows, 1):
    if only and str(i) not in only:
        continue
    path = os.path.join(ROOT, f)
    src = open(path).read()
    if old not in src:
        print(f"{i:2d} STALE  {f}: {old!r} not found", flush=True)
        survived = True
        continue
    try:
        open(path, 'w').write(src.replace(old, new, 1))
        r = subprocess.run(f'go test {pkg} -count=1 -run "^{test.split("/")[0]}$/{"/".join(test.split("/")[1:])}" 2>&1 | tail -3', shell=True, cwd=ROOT, capture_output=True, text=True, executable='/bin/bash')
        out = r.stdout
        if 'build failed' in out or 'setup failed' in out:
            print(f"{i:2d} BROKEN {f}: the mutation does not compile (mend the row)\n{out}", flush=True)
            survived = True
            continue
        caught = 'FAIL' in out
        survived = survived or not caught
        print(f"{i:2d} {'caught  ' if caught else 'SURVIVED'} {f} -> {test}" + ('' if caught else '\n' + out), flush=True)
    finally:
        open(path, 'w').write(src)
sys.exit(1 if survived else 0)
