package gguf

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"citizen/model"
	"citizen/model/kernels"
)

// Limits on hyper-parameters, far above any Llama-family model, so that products of them cannot
// overflow and hostile metadata cannot make the model package allocate absurdly.
const (
	maxDim     = 1 << 24
	maxContext = 1 << 22 // the model precomputes RoPE tables of context × head_dim
)

// Config maps the Llama metadata of f to a model.Config. Keys are prefixed by
// general.architecture, which must be "llama": block_count, embedding_length,
// feed_forward_length, attention.head_count, attention.head_count_kv (default: head_count),
// attention.key_length (default: embedding_length / head_count; value_length and
// rope.dimension_count must equal it when present), rope.freq_base (default 10000),
// attention.layer_norm_rms_epsilon and context_length. The vocabulary size is the length of
// tokenizer.ggml.tokens, the BOS/EOS ids come from tokenizer.ggml.{bos,eos}_token_id, and the
// embeddings are tied when the file has no output.weight tensor. Float hyper-parameters are
// stored as float32; Config reads them as their shortest decimal (1e-05, not 9.99999974e-06), the
// value the Hugging Face config they were converted from held. RoPE scaling and mixtures of
// experts are refused with ErrUnsupported, and so are dimensions above 2^24 and contexts above
// 2^22 positions.
func (f *File) Config() (model.Config, error) {
	arch, err := f.String("general.architecture")
	if err != nil {
		return model.Config{}, err
	}
	if arch != "llama" {
		return model.Config{}, fmt.Errorf("%w: architecture %q (only llama)", ErrUnsupported, arch)
	}
	p := arch + "."
	var bad error
	req := func(key string) int {
		v, err := f.Int(p + key)
		if err != nil && bad == nil {
			bad = err
		}
		return v
	}
	opt := func(key string, def int) int {
		if _, ok := f.Get(p + key); !ok {
			return def
		}
		return req(key)
	}
	optF := func(key string, def float64) float64 {
		if _, ok := f.Get(p + key); !ok {
			return def
		}
		x, err := f.Float(p + key)
		if err != nil && bad == nil {
			bad = err
		}
		if v, _ := f.Get(p + key); v.Type == TypeFloat32 {
			x, _ = strconv.ParseFloat(strconv.FormatFloat(x, 'g', -1, 32), 64)
		}
		return x
	}
	c := model.Config{
		Architectures:         []string{"LlamaForCausalLM"},
		ModelType:             "llama",
		HiddenAct:             "silu",
		TorchDtype:            "float32",
		NumHiddenLayers:       req("block_count"),
		HiddenSize:            req("embedding_length"),
		IntermediateSize:      req("feed_forward_length"),
		NumAttentionHeads:     req("attention.head_count"),
		MaxPositionEmbeddings: req("context_length"),
	}
	c.NumKeyValueHeads = opt("attention.head_count_kv", c.NumAttentionHeads)
	if c.NumAttentionHeads > 0 {
		c.HeadDim = opt("attention.key_length", c.HiddenSize/c.NumAttentionHeads)
	}
	c.RopeTheta = optF("rope.freq_base", 10000)
	if _, ok := f.Get(p + "attention.layer_norm_rms_epsilon"); !ok && bad == nil {
		bad = fmt.Errorf("%w: key %q (Llama uses RMSNorm)", ErrNotFound, p+"attention.layer_norm_rms_epsilon")
	}
	c.RMSNormEps = optF("attention.layer_norm_rms_epsilon", 0)
	if bad != nil {
		return model.Config{}, bad
	}
	unsupported := func(format string, a ...any) (model.Config, error) {
		return model.Config{}, fmt.Errorf("%w: "+format, append([]any{ErrUnsupported}, a...)...)
	}
	for _, d := range []struct {
		name     string
		v, limit int
	}{
		{"block_count", c.NumHiddenLayers, maxDim}, {"embedding_length", c.HiddenSize, maxDim},
		{"feed_forward_length", c.IntermediateSize, maxDim}, {"attention.head_count", c.NumAttentionHeads, maxDim},
		{"attention.head_count_kv", c.NumKeyValueHeads, maxDim}, {"attention.key_length", c.HeadDim, maxDim},
		{"context_length", c.MaxPositionEmbeddings, maxContext},
	} {
		if d.v > d.limit {
			return unsupported("%s%s %d is above %d", p, d.name, d.v, d.limit)
		}
	}
	if vl := opt("attention.value_length", c.HeadDim); vl != c.HeadDim {
		return unsupported("value_length %d differs from key_length %d", vl, c.HeadDim)
	}
	if rd := opt("rope.dimension_count", c.HeadDim); rd != c.HeadDim {
		return unsupported("rope over %d of %d head dimensions (partial rotary)", rd, c.HeadDim)
	}
	if n := opt("expert_count", 0); n != 0 {
		return unsupported("mixture of %d experts", n)
	}
	if v, ok := f.Get(p + "rope.scaling.type"); ok {
		if s, _ := v.Str(); s != "none" {
			return unsupported("rope scaling %v", v)
		}
	}
	for _, k := range []string{"rope.scaling.factor", "rope.freq_scale"} {
		if x := optF(k, 1); x != 1 && !(k == "rope.scaling.factor" && x == 0) {
			return unsupported("%s %g", p+k, x)
		}
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return model.Config{}, err
	}
	c.VocabSize = len(tokens)
	if vs := opt("vocab_size", c.VocabSize); vs != c.VocabSize {
		return model.Config{}, fmt.Errorf("%w: %svocab_size %d but %d tokens", ErrFormat, p, vs, c.VocabSize)
	}
	_, hasOutput := f.Tensor("output.weight")
	c.TieWordEmbeddings = !hasOutput
	for _, id := range []struct {
		key string
		dst **int
	}{{"tokenizer.ggml.bos_token_id", &c.BOSTokenID}, {"tokenizer.ggml.eos_token_id", &c.EOSTokenID}} {
		if _, ok := f.Get(id.key); !ok {
			continue
		}
		v, err := f.Int(id.key)
		if err != nil {
			return model.Config{}, err
		}
		*id.dst = &v
	}
	if bad != nil {
		return model.Config{}, bad
	}
	if err := c.Validate(); err != nil {
		return model.Config{}, fmt.Errorf("gguf: %w", err)
	}
	return c, nil
}

// loadJob dequantizes rows [r0, r1) of a tensor into dst (row-major [rows, cols]). With heads > 0
// the rows are un-permuted per head (see Unpermute).
type loadJob struct {
	info   TensorInfo
	dst    []float32
	r0, r1 int
	heads  int
}

// NewModel builds a model from f's Config and dequantizes every tensor into its float32
// parameters: token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm,
// ffn_gate, ffn_up, ffn_down}, output_norm and, for untied embeddings, output (all with the
// .weight suffix). attn_q and attn_k are un-permuted (by attention.head_count and head_count_kv)
// from llama.cpp's interleaved-RoPE row order to the split-halves order the model uses. Every
// tensor must be present with its exact shape and no other tensor may be present. Tensors are
// dequantized in parallel on GOMAXPROCS goroutines. f must stay open until NewModel returns.
func NewModel(f *File) (*model.Model, error) {
	c, err := f.Config()
	if err != nil {
		return nil, err
	}
	// Check every tensor before allocating the model, so metadata that promises a huge model
	// the file does not hold allocates nothing.
	specs, err := llamaSpecs(f, c)
	if err != nil {
		return nil, err
	}
	m, err := model.New(c)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	var jobs []loadJob
	for _, s := range specs {
		dst := s.view(&m.W)
		rows := 1
		if len(s.info.Dims) == 2 {
			rows = int(s.info.Dims[1])
		}
		step := max(1, (1<<20)/(len(dst)/rows)) // about a million weights a job
		for r := 0; r < rows; r += step {
			jobs = append(jobs, loadJob{info: s.info, dst: dst, r0: r, r1: min(rows, r+step), heads: s.heads})
		}
	}
	if err := f.runJobs(jobs); err != nil {
		return nil, err
	}
	return m, nil
}

// tensorSpec is one tensor NewModel loads: where it goes and how its rows are ordered.
type tensorSpec struct {
	info  TensorInfo
	heads int // > 0: un-permute the rows of this many heads
	view  func(*model.Weights) []float32
	slot  func(*model.QuantWeights) **kernels.QMatrix // matrices: where a quantized copy goes
}

// llamaSpecs finds and checks every tensor a model of config c needs, and refuses any other.
func llamaSpecs(f *File, c model.Config) ([]tensorSpec, error) {
	perLayer := 9
	want := 1 + perLayer*c.NumHiddenLayers + 1
	if !c.TieWordEmbeddings {
		want++
	}
	if c.NumHiddenLayers > len(f.Tensors) {
		return nil, fmt.Errorf("%w: %d layers need %d tensors, the file has %d", ErrNotFound, c.NumHiddenLayers, want, len(f.Tensors))
	}
	C, I, V := c.HiddenSize, c.IntermediateSize, c.VocabSize
	q, kv := c.NumAttentionHeads*c.HeadDim, c.NumKeyValueHeads*c.HeadDim
	specs := make([]tensorSpec, 0, want)
	used := make(map[string]bool, want)
	var slot func(*model.QuantWeights) **kernels.QMatrix // of the tensor add is given next
	add := func(name string, heads int, view func(*model.Weights) []float32, shape ...int) error {
		t, ok := f.Tensor(name)
		if !ok {
			return fmt.Errorf("%w: tensor %q", ErrNotFound, name)
		}
		if got := t.Shape(); !slices.Equal(got, shape) {
			return fmt.Errorf("%w: tensor %q has shape %v, the config needs %v", ErrFormat, name, got, shape)
		}
		if !CanDequantize(t.Type) {
			return fmt.Errorf("%w: tensor %q has type %s, which cannot be dequantized", ErrUnsupported, name, t.Type)
		}
		used[name] = true
		specs = append(specs, tensorSpec{info: t, heads: heads, view: view, slot: slot})
		slot = nil
		return nil
	}
	slot = func(q *model.QuantWeights) **kernels.QMatrix { return &q.Embed }
	if err := add("token_embd.weight", 0, func(w *model.Weights) []float32 { return w.Embed }, V, C); err != nil {
		return nil, err
	}
	for l := 0; l < c.NumHiddenLayers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		lw := func(w *model.Weights) *model.LayerWeights { return &w.Layers[l] }
		ql := func(w *model.QuantWeights) *model.QuantLayer { return &w.Layers[l] }
		for _, e := range []struct {
			name  string
			heads int
			view  func(*model.Weights) []float32
			slot  func(*model.QuantWeights) **kernels.QMatrix
			shape []int
		}{
			{"attn_norm", 0, func(w *model.Weights) []float32 { return lw(w).InputNorm }, nil, []int{C}},
			{"attn_q", c.NumAttentionHeads, func(w *model.Weights) []float32 { return lw(w).Q }, func(w *model.QuantWeights) **kernels.QMatrix { return &ql(w).Q }, []int{q, C}},
			{"attn_k", c.NumKeyValueHeads, func(w *model.Weights) []float32 { return lw(w).K }, func(w *model.QuantWeights) **kernels.QMatrix { return &ql(w).K }, []int{kv, C}},
			{"attn_v", 0, func(w *model.Weights) []float32 { return lw(w).V }, func(w *model.QuantWeights) **kernels.QMatrix { return &ql(w).V }, []int{kv, C}},
			{"attn_output", 0, func(w *model.Weights) []float32 { return lw(w).O }, func(w *model.QuantWeights) **kernels.QMatrix { return &ql(w).O }, []int{C, q}},
			{"ffn_norm", 0, func(w *model.Weights) []float32 { return lw(w).PostNorm }, nil, []int{C}},
			{"ffn_gate", 0, func(w *model.Weights) []float32 { return lw(w).Gate }, func(w *model.QuantWeights) **kernels.QMatrix { return &ql(w).Gate }, []int{I, C}},
			{"ffn_up", 0, func(w *model.Weights) []float32 { return lw(w).Up }, func(w *model.QuantWeights) **kernels.QMatrix { return &ql(w).Up }, []int{I, C}},
			{"ffn_down", 0, func(w *model.Weights) []float32 { return lw(w).Down }, func(w *model.QuantWeights) **kernels.QMatrix { return &ql(w).Down }, []int{C, I}},
		} {
			slot = e.slot
			if err := add(p+e.name+".weight", e.heads, e.view, e.shape...); err != nil {
				return nil, err
			}
		}
	}
	if err := add("output_norm.weight", 0, func(w *model.Weights) []float32 { return w.Norm }, C); err != nil {
		return nil, err
	}
	if !c.TieWordEmbeddings {
		slot = func(q *model.QuantWeights) **kernels.QMatrix { return &q.LMHead }
		if err := add("output.weight", 0, func(w *model.Weights) []float32 { return w.LMHead }, V, C); err != nil {
			return nil, err
		}
	}
	for _, t := range f.Tensors {
		if !used[t.Name] {
			return nil, fmt.Errorf("%w: unexpected tensor %q for a llama model", ErrUnsupported, t.Name)
		}
	}
	return specs, nil
}

func (f *File) runJobs(jobs []loadJob) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return ErrClosed
	}
	next := make(chan loadJob)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range min(runtime.GOMAXPROCS(0), len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				if err := f.runJob(j); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	return first
}

// runJob needs f.mu held for reading.
func (f *File) runJob(j loadJob) error {
	t := j.info
	rows := 1
	if len(t.Dims) == 2 {
		rows = int(t.Dims[1])
	}
	cols := int(t.Dims[0])
	rowBytes, _ := t.Type.RowSize(cols)
	base := f.data[uint64(f.DataOffset)+t.Offset:]
	for r := j.r0; r < j.r1; r++ {
		src := r // the file's row that holds the model's row r
		if j.heads > 0 {
			src = permutedRow(r, rows/j.heads)
		}
		if err := Dequantize(j.dst[r*cols:(r+1)*cols], base[src*rowBytes:(src+1)*rowBytes], t.Type); err != nil {
			return fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
		}
	}
	return nil
}

// permutedRow is the row of llama.cpp's layout that holds row r of Hugging Face's layout of a
// query or key projection with heads of headDim rows. Hugging Face rotates split halves: row
// h·headDim + i·headDim/2 + j (i ∈ {0, 1}, j < headDim/2) pairs with the row headDim/2 away.
// llama.cpp rotates adjacent pairs, so its converter stores that row at h·headDim + 2j + i; the
// inverse is reshape(heads, headDim/2, 2, in).swapaxes(1, 2).
func permutedRow(r, headDim int) int {
	h, k := r/headDim, r%headDim
	half := headDim / 2
	i, j := k/half, k%half
	return h*headDim + 2*j + i
}

// Unpermute returns the rows of w ([heads·headDim, cols] row-major, as llama.cpp's converter
// stores attn_q and attn_k) in Hugging Face's order. It is what NewModel applies; exported for
// tools that handle raw tensors.
func Unpermute(w []float32, heads, cols int) ([]float32, error) {
	if heads <= 0 || cols <= 0 || len(w)%(heads*cols) != 0 || (len(w)/(heads*cols))%2 != 0 {
		return nil, fmt.Errorf("gguf: cannot unpermute %d weights as %d heads × even head_dim × %d", len(w), heads, cols)
	}
	headDim := len(w) / cols / heads
	out := make([]float32, len(w))
	for r := 0; r < heads*headDim; r++ {
		s := permutedRow(r, headDim)
		copy(out[r*cols:(r+1)*cols], w[s*cols:(s+1)*cols])
	}
	return out, nil
}

// LoadOptions choose how LoadModelWith builds the model.
type LoadOptions struct {
	// Float32 dequantizes every tensor to float32 (NewModel) instead of keeping the quantized
	// matrices as blocks (NewQuantizedModel).
	Float32 bool
}

// Float32Env, set to 1 in the environment, makes LoadModel dequantize every tensor to float32.
const Float32Env = "CITIZEN_GGUF_FLOAT32"

// LoadModel opens the GGUF file at path, builds the model and releases the file's bytes. The
// model keeps quantized matrices as blocks (NewQuantizedModel) unless the environment variable
// CITIZEN_GGUF_FLOAT32 is 1 (then NewModel). The returned File is closed: its metadata, tensor
// directory and Tokenizer() stay readable, tensor data does not.
func LoadModel(path string) (*model.Model, *File, error) {
	return LoadModelWith(path, LoadOptions{Float32: os.Getenv(Float32Env) == "1"})
}

// LoadModelWith is LoadModel with explicit options (the environment is not read).
func LoadModelWith(path string, o LoadOptions) (*model.Model, *File, error) {
	f, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	build := NewQuantizedModel
	if o.Float32 {
		build = NewModel
	}
	m, err := build(f)
	cerr := f.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if cerr != nil {
		return nil, nil, cerr
	}
	return m, f, nil
}

// qtypeOf maps the GGUF types the kernels multiply directly to theirs.
func qtypeOf(t Type) (kernels.QType, bool) {
	switch t {
	case Q8_0:
		return kernels.Q8_0, true
	case Q4_0:
		return kernels.Q4_0, true
	case Q4_1:
		return kernels.Q4_1, true
	}
	return 0, false
}

// requantized reports whether NewQuantizedModel stores a matrix of type t as Q8_0 blocks
// rebuilt from its dequantized values (block types the kernels do not multiply directly).
func requantized(t Type) bool {
	switch t {
	case Q5_0, Q5_1, Q4_K, Q5_K, Q6_K:
		return true
	}
	return false
}

// NewQuantizedModel builds a model from f (the tensors, names and checks of NewModel) that keeps
// its matrices as blocks in Model.Quant: Q8_0, Q4_0 and Q4_1 tensors hold the file's blocks
// unchanged (q/k rows un-permuted as whole rows), so the weights are exactly NewModel's;
// Q5_0, Q5_1, Q4_K, Q5_K and Q6_K tensors are dequantized and requantized to Q8_0 (an extra
// rounding of at most half a step of 1/127 of each 32-block's largest magnitude); float tensors
// (F32, F16, BF16, F64) and all norms are float32. f must stay open until it returns.
func NewQuantizedModel(f *File) (*model.Model, error) {
	c, err := f.Config()
	if err != nil {
		return nil, err
	}
	specs, err := llamaSpecs(f, c)
	if err != nil {
		return nil, err
	}
	q := model.QuantWeights{Layers: make([]model.QuantLayer, c.NumHiddenLayers)}
	var quant []tensorSpec
	for _, s := range specs {
		if _, ok := qtypeOf(s.info.Type); s.slot != nil && (ok || requantized(s.info.Type)) && s.info.Dims[0]%kernels.QBlock == 0 {
			quant = append(quant, s)
		}
	}
	mats := make([]*kernels.QMatrix, len(quant))
	errs := make([]error, len(quant))
	f.mu.RLock()
	if f.closed {
		f.mu.RUnlock()
		return nil, ErrClosed
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(runtime.GOMAXPROCS(0), len(quant)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				mats[i], errs[i] = f.quantMatrix(quant[i])
			}
		}()
	}
	for i := range quant {
		next <- i
	}
	close(next)
	wg.Wait()
	f.mu.RUnlock()
	for i, s := range quant {
		if errs[i] != nil {
			return nil, errs[i]
		}
		*s.slot(&q) = mats[i]
	}
	m, err := model.NewQuantized(c, q)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	var jobs []loadJob
	for _, s := range specs {
		dst := s.view(&m.W)
		if dst == nil {
			continue // quantized
		}
		rows := 1
		if len(s.info.Dims) == 2 {
			rows = int(s.info.Dims[1])
		}
		step := max(1, (1<<20)/(len(dst)/rows))
		for r := 0; r < rows; r += step {
			jobs = append(jobs, loadJob{info: s.info, dst: dst, r0: r, r1: min(rows, r+step), heads: s.heads})
		}
	}
	if err := f.runJobs(jobs); err != nil {
		return nil, err
	}
	return m, nil
}

// quantMatrix builds the QMatrix of a 2-D tensor (rows un-permuted per head when s.heads > 0).
// It needs f.mu held for reading.
func (f *File) quantMatrix(s tensorSpec) (*kernels.QMatrix, error) {
	t := s.info
	cols, rows := int(t.Dims[0]), int(t.Dims[1])
	rowBytes, _ := t.Type.RowSize(cols)
	base := f.data[uint64(f.DataOffset)+t.Offset:]
	src := func(r int) []byte {
		if s.heads > 0 {
			r = permutedRow(r, rows/s.heads)
		}
		return base[r*rowBytes : (r+1)*rowBytes]
	}
	qt, native := qtypeOf(t.Type)
	if !native {
		qt = kernels.Q8_0
	}
	outRow := cols / kernels.QBlock * qt.BlockBytes()
	buf := make([]byte, rows*outRow)
	var tmp []float32
	if !native {
		tmp = make([]float32, cols)
	}
	for r := 0; r < rows; r++ {
		dst := buf[r*outRow : (r+1)*outRow]
		if native {
			copy(dst, src(r))
			continue
		}
		if err := Dequantize(tmp, src(r), t.Type); err != nil {
			return nil, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
		}
		if err := kernels.QuantizeQ8_0(dst, tmp); err != nil {
			return nil, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
		}
	}
	w, err := kernels.NewQMatrix(qt, rows, cols, buf)
	if err != nil {
		return nil, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
	}
	return w, nil
}
