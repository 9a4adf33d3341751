// The state of a llama.cpp grammar sampler, which llama.h does not expose:
// jump-forward decoding (forced.cpp) and lazy triggers (trigger.cpp) read
// it. The internal header comes from the same llama.cpp tree as the library
// (the include path names its include/ directory, so ../src is the tree's
// own src/).
#ifndef LLOYAL_GRAMMARSTATE_H
#define LLOYAL_GRAMMARSTATE_H

#include <cstring>
#include <string>

#include "../src/llama-grammar.h"
#include "llama.h"

namespace lloyal {

// The layout of llama_sampler_grammar in llama-sampling.cpp (llama.cpp as
// pinned by the ollama module): the grammar is its fourth field.
struct sampler_grammar {
    const struct llama_vocab *vocab;
    std::string grammar_str;
    std::string grammar_root;
    struct llama_grammar *grammar;
};

// grammar_of is the grammar of a grammar sampler, checked by name; nullptr
// for any other sampler, or one without a grammar.
inline llama_grammar *grammar_of(struct llama_sampler *s) {
    if (s == nullptr || s->ctx == nullptr || std::strcmp(llama_sampler_name(s), "grammar") != 0) {
        return nullptr;
    }
    return static_cast<sampler_grammar *>(s->ctx)->grammar;
}

} // namespace lloyal

#endif
