// A lazy grammar's trigger, found by lloyal rather than by llama.cpp.
// llama.cpp matches a trigger with std::regex_match over everything the
// model wrote since the turn began, after every token; libstdc++'s matcher
// recurses once a character, so a turn of some 48,000 characters overflowed
// the stack and ended the process. lloyal builds its lazy grammars without
// patterns (llama.cpp then only buffers the turn), finds the trigger itself
// (sampler.go: a word in the new text, an anchored pattern with Go's
// regexp), and arms the grammar here as llama.cpp would have.
#include <cstdio>
#include <exception>
#include <string>

#include "grammarstate.h"
#include "shim.h"

extern "C" bool lloyal_trigger_buffer(struct llama_sampler *grammar, const char **text, size_t *len, size_t *last) {
    llama_grammar *g = lloyal::grammar_of(grammar);
    if (g == nullptr || !g->awaiting_trigger) {
        return false;
    }
    *text = g->trigger_buffer.data();
    *len = g->trigger_buffer.size();
    *last = g->trigger_buffer_positions.empty() ? 0 : g->trigger_buffer_positions.back().second.first;
    return true;
}

extern "C" int lloyal_trigger_arm(struct llama_sampler *grammar, size_t start, char *err, size_t errlen) {
    llama_grammar *g = lloyal::grammar_of(grammar);
    if (g == nullptr || !g->awaiting_trigger || start > g->trigger_buffer.size()) {
        std::snprintf(err, errlen, "%s", "no trigger to arm the grammar at");
        return 1;
    }
    // As llama_grammar_accept_impl does on a match: the tokens from the one
    // the trigger begins in are accepted again, the first from the trigger
    // on.
    g->awaiting_trigger = false;
    std::string buffer = std::move(g->trigger_buffer);
    auto positions = std::move(g->trigger_buffer_positions);
    g->trigger_buffer.clear();
    g->trigger_buffer_positions.clear();
    try {
        for (const auto &[tok, pos] : positions) {
            auto [tok_start, tok_end] = pos;
            if (tok_end <= start) {
                continue;
            }
            size_t from = tok_start < start ? start : tok_start;
            llama_grammar_accept_token(*g, tok, buffer.substr(from, tok_end - from));
        }
    } catch (const std::exception &e) {
        std::snprintf(err, errlen, "%s", e.what());
        return 1;
    } catch (...) {
        std::snprintf(err, errlen, "%s", "unknown error arming the grammar");
        return 1;
    }
    return 0;
}

extern "C" void lloyal_trigger_keep(struct llama_sampler *grammar, size_t keep) {
    llama_grammar *g = lloyal::grammar_of(grammar);
    if (g == nullptr || !g->awaiting_trigger || g->trigger_buffer.size() <= keep) {
        return;
    }
    // Whole tokens: the first kept is the one the last keep bytes begin in.
    size_t cut = g->trigger_buffer.size() - keep;
    auto &positions = g->trigger_buffer_positions;
    size_t first = 0;
    while (first < positions.size() && positions[first].second.second <= cut) {
        first++;
    }
    cut = first < positions.size() ? positions[first].second.first : g->trigger_buffer.size();
    positions.erase(positions.begin(), positions.begin() + first);
    for (auto &p : positions) {
        p.second.first -= cut;
        p.second.second -= cut;
    }
    g->trigger_buffer.erase(0, cut);
}
