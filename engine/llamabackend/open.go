package llamabackend

import "github.com/lloyal-ai/lloyal/engine/llamacpp/model"

// OpenContext opens the model ref names (a GGUF file or an ollama model
// name, see Open) with its chat format as o.Format says, and one context
// over it as o says: what a run on this machine drives. The model's layers
// go to the GPU device as o.GPULayers says, as many as fit beside this
// context when every one is asked for. closeAll frees the context, then
// the model.
func OpenContext(ref string, o ContextOptions) (be *Backend, closeAll func(), err error) {
	fit := o.withDefaults().params()
	m, err := Open(ref, model.Options{GPULayers: o.GPULayers, Fit: &fit}, o.Format)
	if err != nil {
		return nil, nil, err
	}
	be, err = New(m, o)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return be, func() { be.Close(); m.Close() }, nil
}
