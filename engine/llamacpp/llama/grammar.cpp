// JSON Schema → GBNF through llama.cpp's own converter (common library, linked
// from ollama's build), so the grammars we force are the ones llama.cpp's
// tooling produces and tests.
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
