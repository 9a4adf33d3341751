package llama

import (
	"fmt"
	"strings"

	"github.com/lloyal-ai/lloyal/internal/gguf"
)

// clip.cpp reads a projector's keys with getters that assert each key's
// type (ending the process) and asserts that a vision projector's image
// mean and deviation are there: checkProjectorKeys refuses a file that
// would reach those asserts, naming the key. The types are the getters'
// (llama.cpp's tools/mtmd/clip.cpp, as pinned by the ollama module).

var projectorKeyTypes = map[string]string{
	"clip.has_audio_encoder": "bool", "clip.has_vision_encoder": "bool", "clip.use_gelu": "bool", "clip.use_silu": "bool",
	"clip.projector_type": "string", "clip.vision.projector_type": "string", "clip.audio.projector_type": "string",
	"clip.vision.mm_patch_merge_type": "string",
	"clip.vision.image_size":          "uint32", "clip.vision.patch_size": "uint32", "clip.vision.image_crop_resolution": "uint32",
	"clip.vision.preproc_image_size": "uint32", "clip.vision.projector.scale_factor": "uint32",
	"clip.vision.spatial_merge_size": "uint32", "clip.vision.n_wa_pattern": "uint32", "clip.minicpmv_query_num": "uint32",
	"clip.audio.num_mel_bins": "uint32", "clip.audio.projector.stack_factor": "uint32",
	"clip.minicpmv_version":            "int32",
	"clip.vision.image_grid_pinpoints": "[]int32", "clip.vision.feature_layer": "[]int32",
}

// projectorKeyType is the Go type of k's value as clip.cpp reads it, or
// "" for a key it does not read with a typed getter.
func projectorKeyType(k string) string {
	if t, ok := projectorKeyTypes[k]; ok {
		return t
	}
	for _, enc := range []string{"clip.vision.", "clip.audio."} {
		switch strings.TrimPrefix(k, enc) {
		case "embedding_length", "feed_forward_length", "block_count", "projection_dim", "attention.head_count":
			return "uint32"
		case "attention.layer_norm_epsilon":
			return "float32"
		}
	}
	return ""
}

// checkProjectorKeys says which key of the projector gf clip.cpp would
// abort on, or nil.
func checkProjectorKeys(gf *gguf.File) error {
	for _, kv := range gf.KV {
		want := projectorKeyType(kv.Key)
		if got := fmt.Sprintf("%T", kv.Value); want != "" && got != want {
			return fmt.Errorf("its %s is %s, where clip.cpp reads %s (the file is damaged)", kv.Key, got, want)
		}
	}
	if v, _ := gf.Get("clip.has_vision_encoder"); v == true {
		for _, k := range []string{"clip.vision.image_mean", "clip.vision.image_std"} {
			if f, ok := gf.Get(k); !ok {
				return fmt.Errorf("it has no %s (three numbers, one per colour): the file is damaged", k)
			} else if a, is := f.([]float32); !is || len(a) < 3 {
				return fmt.Errorf("its %s is %T %v: it is three float32 numbers, one per colour (the file is damaged)", k, f, f)
			}
		}
	}
	return nil
}
