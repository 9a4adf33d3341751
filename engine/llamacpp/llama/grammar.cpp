// JSON Schema → GBNF through llama.cpp's own converter (common library, linked
// from ollama's build), so the grammars we force are the ones llama.cpp's
// tooling produces and tests.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include "json-schema-to-grammar.h"
#include "shim.h"

static char *dup_string(const std::string &s) {
    char *out = static_cast<char *>(std::malloc(s.size() + 1));
    if (out != nullptr) {
        std::memcpy(out, s.data(), s.size());
        out[s.size()] = '\0';
    }
    return out;
}

extern "C" int lloyal_schema_to_grammar(const char *schema_json, char **out) {
    try {
        auto schema = nlohmann::ordered_json::parse(schema_json);
        *out = dup_string(json_schema_to_grammar(schema, true));
        return 0;
    } catch (const std::exception &e) {
        *out = dup_string(e.what());
        return 1;
    } catch (...) {
        *out = dup_string("unknown error converting JSON Schema to grammar");
        return 1;
    }
}

// llama_sampler_accept can throw: a grammar fed a token it refuses (a lazy
// grammar replaying the text from its trigger on) throws "Unexpected empty
// grammar stack", and an exception leaving a C call through cgo ends the
// process. Here it is an error, its message in err.
extern "C" int lloyal_sampler_accept(struct llama_sampler *chain, llama_token t, char *err, size_t errlen) {
    try {
        llama_sampler_accept(chain, t);
        return 0;
    } catch (const std::exception &e) {
        std::snprintf(err, errlen, "%s", e.what());
    } catch (...) {
        std::snprintf(err, errlen, "%s", "unknown error accepting a token");
    }
    return 1;
}
