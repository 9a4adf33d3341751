// Jump-forward decoding's C side: the text a grammar allows as the only
// continuation from its present state, and whether a run of tokens keeps to
// the grammar. Both read llama.cpp's grammar state (grammarstate.h).
#include <cstring>
#include <exception>
#include <string>

#include "grammarstate.h"
#include "shim.h"

namespace {

// forced_char is the one code point every stack of g accepts next, or false
// when the stacks allow more than one, a class of characters, a token, or
// the end. *ends is set when every stack is empty (only the end is left).
bool forced_char(llama_grammar *g, uint32_t *chr, bool *ends) {
    *ends = false;
    if (g->stacks.empty()) {
        return false;
    }
    bool first = true, all_empty = true;
    bool forced = true;
    for (const auto &stack : g->stacks) {
        if (stack.empty()) {
            forced = false; // the grammar may end here
            continue;
        }
        all_empty = false;
        const llama_grammar_element *pos = stack.back();
        if (pos->type != LLAMA_GRETYPE_CHAR || pos[1].type == LLAMA_GRETYPE_CHAR_ALT ||
            pos[1].type == LLAMA_GRETYPE_CHAR_RNG_UPPER) {
            forced = false;
            continue;
        }
        if (first) {
            *chr = pos->value;
            first = false;
        } else if (pos->value != *chr) {
            forced = false;
        }
    }
    *ends = all_empty;
    return forced && !first;
}

int put_utf8(uint32_t c, char *out) {
    if (c < 0x80) {
        out[0] = char(c);
        return 1;
    }
    if (c < 0x800) {
        out[0] = char(0xC0 | (c >> 6));
        out[1] = char(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = char(0xE0 | (c >> 12));
        out[1] = char(0x80 | ((c >> 6) & 0x3F));
        out[2] = char(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = char(0xF0 | (c >> 18));
    out[1] = char(0x80 | ((c >> 12) & 0x3F));
    out[2] = char(0x80 | ((c >> 6) & 0x3F));
    out[3] = char(0x80 | (c & 0x3F));
    return 4;
}

} // namespace

extern "C" int32_t lloyal_forced_text(struct llama_sampler *grammar, char *buf, int32_t cap, bool *ends) {
    *ends = false;
    llama_grammar *g = lloyal::grammar_of(grammar);
    if (g == nullptr || g->awaiting_trigger || g->partial_utf8.n_remain != 0) {
        return 0;
    }
    // Most calls come where the grammar allows a choice (inside a string):
    // they return before copying the stacks.
    uint32_t chr = 0;
    if (!forced_char(g, &chr, ends)) {
        return 0;
    }
    // Walk the stacks forward one forced character at a time, then put the
    // grammar's own back.
    llama_grammar_stacks saved = g->stacks;
    int32_t n = 0;
    try {
        do {
            char utf8[4];
            int k = put_utf8(chr, utf8);
            if (n + k > cap) {
                break;
            }
            std::memcpy(buf + n, utf8, k);
            n += k;
            llama_grammar_accept(g, chr);
        } while (forced_char(g, &chr, ends));
    } catch (...) {
        n = 0;
        *ends = false;
    }
    g->stacks = std::move(saved);
    return n;
}

extern "C" bool lloyal_grammar_accepts(struct llama_sampler *grammar, const llama_token *tokens, int32_t n) {
    llama_grammar *g = lloyal::grammar_of(grammar);
    if (g == nullptr) {
        return true;
    }
    llama_grammar *c = llama_grammar_clone_impl(*g);
    bool ok = true;
    try {
        for (int32_t i = 0; i < n && ok; i++) {
            llama_grammar_accept_impl(*c, tokens[i]);
            ok = !c->stacks.empty();
        }
    } catch (const std::exception &) {
        ok = false;
    }
    llama_grammar_free_impl(c);
    return ok;
}
