package modelgen

import (
	"fmt"
	"os"
	"strings"
)

// Choice is a model as `lloyal model tiny` is asked for one: a preset, the
// shape fields given over it (Given says which, by flag name: layers,
// width, ff, heads, kv-heads, ctx, seed, type), a weight type and a
// tokenizer borrowed from another GGUF file.
type Choice struct {
	Preset, Vocab, Type string
	Shape               Options
	Given               func(flag string) bool
	// Vision writes a vision projector for the model beside it
	// (ProjectorPath).
	Vision bool
}

// Options is the preset's shape with the given fields over it.
func (c Choice) Options() (Options, error) {
	o, err := Preset(c.Preset)
	if err != nil {
		return o, err
	}
	for _, s := range []struct {
		flag     string
		dst, val *int
	}{{"layers", &o.Layers, &c.Shape.Layers}, {"width", &o.Embd, &c.Shape.Embd}, {"ff", &o.FF, &c.Shape.FF},
		{"heads", &o.Heads, &c.Shape.Heads}, {"kv-heads", &o.KVHeads, &c.Shape.KVHeads}, {"ctx", &o.CtxTrain, &c.Shape.CtxTrain}} {
		if c.Given(s.flag) {
			*s.dst = *s.val
		}
	}
	if c.Given("seed") {
		o.Seed = c.Shape.Seed
	}
	if c.Given("type") {
		if o.Type, err = WeightType(c.Type); err != nil {
			return o, err
		}
	}
	if c.Vocab != "" {
		if o.Vocab, err = VocabFrom(c.Vocab); err != nil {
			return o, err
		}
	}
	return o, nil
}

// ProjectorPath is where Write puts a model's projector: beside it,
// model.gguf's as model.mmproj.gguf.
func ProjectorPath(model string) string {
	return strings.TrimSuffix(model, ".gguf") + ".mmproj.gguf"
}

// Write writes the chosen model to path (replacing a file there only with
// force) and, with Vision, its projector beside it, and says what it
// wrote, a line each.
func (c Choice) Write(path string, force bool) (said string, err error) {
	o, err := c.Options()
	if err != nil {
		return "", err
	}
	write, writeProj := CreateFile, CreateProjectorFile
	if force {
		write, writeProj = WriteFile, WriteProjectorFile
	}
	if err := write(path, o); err != nil {
		return "", err
	}
	st, _ := os.Stat(path)
	said = fmt.Sprintf("wrote %s: %d layers, width %d, %d-token vocabulary, %.1fM parameters, %s, %.1f MiB\n",
		path, o.Layers, o.Embd, len(o.Vocab.Tokens), float64(o.Params())/1e6, o.Type, float64(st.Size())/(1<<20))
	if c.Vision {
		p := ProjectorFor(o)
		if err := writeProj(ProjectorPath(path), p); err != nil {
			return "", err
		}
		said += fmt.Sprintf("wrote %s: its vision projector (run it with --mmproj %s): a %d×%d image is %d positions\n",
			ProjectorPath(path), ProjectorPath(path), p.ImageSize, p.ImageSize, (p.ImageSize/p.PatchSize)*(p.ImageSize/p.PatchSize))
	}
	return said + "its weights are random: it exercises lloyal end to end, but its text is noise\n", nil
}
