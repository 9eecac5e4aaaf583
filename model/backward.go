package model

// backward propagates ∂L/∂logits (left in a.logits by loss) to the parameters. Gradients are
// accumulated into g (nil: base weights frozen) and into the adapter gradients lg (nil: no
// adapter training). Input gradients always flow through the base weights.
func (m *Model) backward(a *acts, b *Batch, lora *Adapter, g *Weights, lg [][numModules]loraPair) {
	c := m.Config
	T, C, I, H, KV, hd, V := a.T, c.HiddenSize, c.IntermediateSize, c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.VocabSize
	qD, kvD := c.qDim(), c.kvDim()
	r := 0
	var s float32
	if lora != nil {
		r, s = lora.Config.Rank, lora.Scale()
	}
	n := T*C*2 + a.M*C + T*qD*3 + T*kvD*4 + T*I*3 + (T+max(C, qD, I))*r
	if cap(a.dbuf) < n {
		a.dbuf = make([]float32, n)
	}
	// The scratch is reused across calls. Every buffer below is overwritten before it is read
	// (the first product into an input gradient writes, the others add), except the residual
	// stream's gradient dres, which the norms' backward passes accumulate into.
	ar := arena{buf: a.dbuf[:n]}
	dres, dln := ar.take(T*C), ar.take(T*C)
	dlnfRows := ar.take(a.M * C)
	dq, datto, drows := ar.take(T*qD), ar.take(T*qD), ar.take(T*qD)
	dk, dv, dkrows, dvrows := ar.take(T*kvD), ar.take(T*kvD), ar.take(T*kvD), ar.take(T*kvD)
	dh, dgate, dup := ar.take(T*I), ar.take(T*I), ar.take(T*I)
	du := ar.take((T + max(C, qD, I)) * r) // loraBackward's scratch

	pick := func(w *Weights, f func(*Weights) []float32) []float32 {
		if w == nil {
			return nil
		}
		return f(w)
	}
	// projBackward: dx = dy·W (+= when acc; + LoRA), dW += dyᵀ·x; dx nil: no input gradient.
	projBackward := func(l, mod int, dx, dy, x, dw []float32, acc bool) {
		in, out := c.moduleDims(mod)
		m.layerMatrix(l, mod).backward(dx, dw, dy, x, T, in, out, acc)
		if lora != nil && lora.layers[l][mod].A != nil {
			p := lora.layers[l][mod]
			var da, db []float32
			if lg != nil {
				da, db = lg[l][mod].A, lg[l][mod].B
			}
			loraBackward(dx, da, db, du, dy, x, a.lu[l][mod], p.A, p.B, T, in, out, r, s)
		}
	}

	// Output head: dlnf rows = dlogits·W, dW += dlogitsᵀ·lnf rows.
	m.headMatrix().backward(dlnfRows, pick(g, func(w *Weights) []float32 { return w.LMHead }), a.logits, a.lnfRows, a.M, C, V, false)
	clear(dres)
	clear(dln)
	for i, t := range a.rows {
		copy(dln[t*C:(t+1)*C], dlnfRows[i*C:(i+1)*C])
	}
	rmsnormBackward(dres, pick(g, func(w *Weights) []float32 { return w.Norm }), dln, a.resid[c.NumHiddenLayers], m.W.Norm, a.rstdf, T, C)

	for l := c.NumHiddenLayers - 1; l >= 0; l-- {
		w := &m.W.Layers[l]
		var gw *LayerWeights
		if g != nil {
			gw = &g.Layers[l]
		}
		gl := func(f func(*LayerWeights) []float32) []float32 {
			if gw == nil {
				return nil
			}
			return f(gw)
		}
		// MLP: resid[l+1] = mid + down(silu(gate(ln2))·up(ln2))
		projBackward(l, modDown, dh, dres, a.hh[l], gl(func(x *LayerWeights) []float32 { return x.Down }), false)
		swigluBackward(dgate, dup, dh, a.gate[l], a.up[l], T*I)
		projBackward(l, modGate, dln, dgate, a.ln2[l], gl(func(x *LayerWeights) []float32 { return x.Gate }), false)
		projBackward(l, modUp, dln, dup, a.ln2[l], gl(func(x *LayerWeights) []float32 { return x.Up }), true)
		rmsnormBackward(dres, gl(func(x *LayerWeights) []float32 { return x.PostNorm }), dln, a.mid[l], w.PostNorm, a.rstd2[l], T, C)
		// attention: mid = resid[l] + o(attn(q(ln1), k(ln1), v(ln1)))
		projBackward(l, modO, drows, dres, a.attrows[l], gl(func(x *LayerWeights) []float32 { return x.O }), false)
		rowsToHeads(datto, drows, T, H, hd, nil, nil)
		attentionBackward(dq, dk, dv, datto, a.att[l], a.q[l], a.k[l], a.v[l], a.spans, T, H, KV, hd)
		headsToRows(drows, dq, T, H, hd, a.pos, m.rope)
		headsToRows(dkrows, dk, T, KV, hd, a.pos, m.rope)
		headsToRows(dvrows, dv, T, KV, hd, nil, nil)
		if l == 0 && g == nil {
			// the gradient below the first layer would only feed the frozen embedding
			projBackward(l, modQ, nil, drows, a.ln1[l], nil, false)
			projBackward(l, modK, nil, dkrows, a.ln1[l], nil, false)
			projBackward(l, modV, nil, dvrows, a.ln1[l], nil, false)
			break
		}
		projBackward(l, modQ, dln, drows, a.ln1[l], gl(func(x *LayerWeights) []float32 { return x.Q }), false)
		projBackward(l, modK, dln, dkrows, a.ln1[l], gl(func(x *LayerWeights) []float32 { return x.K }), true)
		projBackward(l, modV, dln, dvrows, a.ln1[l], gl(func(x *LayerWeights) []float32 { return x.V }), true)
		rmsnormBackward(dres, gl(func(x *LayerWeights) []float32 { return x.InputNorm }), dln, a.resid[l], w.InputNorm, a.rstd1[l], T, C)
	}
	if g != nil {
		embedBackward(g.Embed, dres, b.Tokens, C)
	}
}
