package llamabackend

import "github.com/lloyal-ai/lloyal/engine/llamacpp/llama"

// KVType is a KV cache element type (--kv-type): f16 (the default), q8_0 or
// q4_0. A quantized cache holds more cells per byte and turns flash
// attention on.
type KVType = llama.KVType

// KVF16 is the default KV cache element type.
const KVF16 = llama.KVF16

// ParseKVType reads a --kv-type value, naming the values that work when it
// is none of them.
func ParseKVType(s string) (KVType, error) { return llama.ParseKVType(s) }
