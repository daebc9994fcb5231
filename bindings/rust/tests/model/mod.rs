//! model/mod.rs - a llama2.c checkpoint loader and a decode loop over the `ComputeBackend` trait.
//!
//! A small port of tools/model (Llama2cLoader.cpp, Decoder.cpp, Sampler.cpp's argmax) that issues
//! the C++ driver's calls in the same order, so its greedy tokens must equal the C++ golden. F32
//! matrices go through quantized_matmul with DType::F32, as the driver does by default.
//!
//! The decoder is an engine written against yule-gpu 0.1.0's trait and nothing else: generic over
//! `B: ComputeBackend + ?Sized` (a `dyn ComputeBackend` too), it names only the trait's items.
//! Against yule-gpu the same code compiles with these imports instead:
//! `use yule_core::dtype::DType; use yule_core::error::Result;
//! use yule_gpu::{BufferHandle, ComputeBackend};`.
#![allow(dead_code)]

use std::path::PathBuf;

use sinter::{BufferHandle, ComputeBackend, DType, Result};

/// The model's shape, from the checkpoint's header.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub dim: u32,
    pub hidden_dim: u32,
    pub n_layers: u32,
    pub n_heads: u32,
    pub n_kv_heads: u32,
    pub vocab_size: u32,
    pub seq_len: u32,
    pub rope_base: f32,
    pub eps: f32,
}

impl Config {
    pub fn head_dim(&self) -> u32 {
        self.dim / self.n_heads
    }
    pub fn kv_dim(&self) -> u32 {
        self.head_dim() * self.n_kv_heads
    }
}

/// One layer's tensors: byte ranges of the checkpoint (little-endian f32, [rows][cols]).
pub struct Layer<'a> {
    pub attn_norm: &'a [u8],
    pub wq: &'a [u8],
    pub wk: &'a [u8],
    pub wv: &'a [u8],
    pub wo: &'a [u8],
    pub ffn_norm: &'a [u8],
    pub gate: &'a [u8],
    pub down: &'a [u8],
    pub up: &'a [u8],
}

/// A parsed llama2.c checkpoint; the tensors borrow the file's bytes.
pub struct Weights<'a> {
    pub config: Config,
    pub embedding: &'a [u8],
    pub layers: Vec<Layer<'a>>,
    pub output_norm: &'a [u8],
    /// None when the classifier is the token embedding (positive vocab_size in the header).
    pub classifier: Option<&'a [u8]>,
}

/// Where stories260K.bin lives: $SINTER_SHARED_DIR/models, else ../shared beside the checkout.
pub fn stories260k_path() -> PathBuf {
    let shared = std::env::var_os("SINTER_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    shared.join("models/stories260K.bin")
}

/// Parses a llama2.c checkpoint: 7 i32 header fields, then the f32 tensors in file order.
pub fn parse_llama2c(bytes: &[u8]) -> std::result::Result<Weights<'_>, String> {
    const HEADER: usize = 7 * 4;
    if bytes.len() < HEADER {
        return Err(format!(
            "llama2c: file holds {} bytes, the header needs {HEADER}",
            bytes.len()
        ));
    }
    let field = |i: usize| i32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap());
    let h: Vec<i32> = (0..7).map(field).collect();
    if h.iter()
        .enumerate()
        .any(|(i, &v)| v == 0 || (v < 0 && i != 5) || v == i32::MIN)
    {
        return Err(format!("llama2c: bad header {h:?}"));
    }
    let shared = h[5] > 0;
    let c = Config {
        dim: h[0] as u32,
        hidden_dim: h[1] as u32,
        n_layers: h[2] as u32,
        n_heads: h[3] as u32,
        n_kv_heads: h[4] as u32,
        vocab_size: h[5].unsigned_abs(),
        seq_len: h[6] as u32,
        rope_base: 10000.0,
        eps: 1e-5,
    };
    if c.dim % c.n_heads != 0 || c.n_heads % c.n_kv_heads != 0 {
        return Err(format!("llama2c: heads do not divide: {c:?}"));
    }
    let (l, dim, kv, hidden) = (
        c.n_layers as usize,
        c.dim as usize,
        c.kv_dim() as usize,
        c.hidden_dim as usize,
    );
    let vocab = c.vocab_size as usize;
    let rope_tables = c.seq_len as usize * c.head_dim() as usize;
    let floats = vocab * dim
        + 2 * l * dim
        + 2 * l * dim * dim
        + 2 * l * kv * dim
        + 3 * l * hidden * dim
        + dim
        + rope_tables
        + if shared { 0 } else { vocab * dim };
    if bytes.len() != HEADER + floats * 4 {
        return Err(format!(
            "llama2c: file holds {} bytes, the header implies {}",
            bytes.len(),
            HEADER + floats * 4
        ));
    }
    let mut at = HEADER;
    let mut take = |n: usize| {
        let t = &bytes[at..at + n * 4];
        at += n * 4;
        t
    };
    let embedding = take(vocab * dim);
    let mut per_layer = |n: usize| (0..l).map(|_| take(n)).collect::<Vec<_>>();
    let attn_norm = per_layer(dim);
    let wq = per_layer(dim * dim);
    let wk = per_layer(kv * dim);
    let wv = per_layer(kv * dim);
    let wo = per_layer(dim * dim);
    let ffn_norm = per_layer(dim);
    let gate = per_layer(hidden * dim);
    let down = per_layer(dim * hidden);
    let up = per_layer(hidden * dim);
    let output_norm = take(dim);
    take(rope_tables);
    let classifier = if shared {
        None
    } else {
        Some(take(vocab * dim))
    };
    let layers = (0..l)
        .map(|i| Layer {
            attn_norm: attn_norm[i],
            wq: wq[i],
            wk: wk[i],
            wv: wv[i],
            wo: wo[i],
            ffn_norm: ffn_norm[i],
            gate: gate[i],
            down: down[i],
            up: up[i],
        })
        .collect();
    Ok(Weights {
        config: c,
        embedding,
        layers,
        output_norm,
        classifier,
    })
}

/// An f32 matrix on the device, issued as quantized_matmul with DType::F32.
#[derive(Clone, Copy)]
struct Matrix {
    buffer: BufferHandle,
    rows: u32,
    cols: u32,
}

struct DeviceLayer {
    attn_norm: BufferHandle,
    ffn_norm: BufferHandle,
    k_cache: BufferHandle,
    v_cache: BufferHandle,
    wq: Matrix,
    wk: Matrix,
    wv: Matrix,
    wo: Matrix,
    gate: Matrix,
    up: Matrix,
    down: Matrix,
}

/// The decoder: weights, KV caches and activations on one backend, freed on drop.
pub struct Decoder<'b, B: ComputeBackend + ?Sized> {
    b: &'b B,
    c: Config,
    owned: Vec<BufferHandle>,
    layers: Vec<DeviceLayer>,
    embedding: BufferHandle,
    output_norm: BufferHandle,
    classifier: Matrix,
    x: BufferHandle,
    residual: BufferHandle,
    xb: BufferHandle,
    q: BufferHandle,
    k: BufferHandle,
    v: BufferHandle,
    scores: BufferHandle,
    attn_out: BufferHandle,
    hb: BufferHandle,
    hb2: BufferHandle,
    logits: BufferHandle,
}

/// Bytes of an f32.
const F: usize = 4;

impl<'b, B: ComputeBackend + ?Sized> Decoder<'b, B> {
    fn alloc(&mut self, bytes: usize) -> Result<BufferHandle> {
        let h = self.b.allocate(bytes)?;
        self.owned.push(h);
        Ok(h)
    }

    fn upload(&mut self, bytes: &[u8]) -> Result<BufferHandle> {
        let h = self.alloc(bytes.len())?;
        self.b.copy_to_device(bytes, &h)?;
        Ok(h)
    }

    fn matrix(&mut self, bytes: &[u8], rows: u32, cols: u32) -> Result<Matrix> {
        Ok(Matrix {
            buffer: self.upload(bytes)?,
            rows,
            cols,
        })
    }

    /// Uploads the weights in the C++ driver's order and allocates caches and activations.
    pub fn new(b: &'b B, w: &Weights<'_>) -> Result<Self> {
        let c = w.config;
        let none = BufferHandle(0);
        let empty = Matrix {
            buffer: none,
            rows: 0,
            cols: 0,
        };
        let mut d = Decoder {
            b,
            c,
            owned: Vec::new(),
            layers: Vec::new(),
            embedding: none,
            output_norm: none,
            classifier: empty,
            x: none,
            residual: none,
            xb: none,
            q: none,
            k: none,
            v: none,
            scores: none,
            attn_out: none,
            hb: none,
            hb2: none,
            logits: none,
        };
        let (dim, kv, hidden) = (c.dim, c.kv_dim(), c.hidden_dim);
        d.embedding = d.upload(w.embedding)?;
        for l in &w.layers {
            let attn_norm = d.upload(l.attn_norm)?;
            let wq = d.matrix(l.wq, dim, dim)?;
            let wk = d.matrix(l.wk, kv, dim)?;
            let wv = d.matrix(l.wv, kv, dim)?;
            let wo = d.matrix(l.wo, dim, dim)?;
            let ffn_norm = d.upload(l.ffn_norm)?;
            let gate = d.matrix(l.gate, hidden, dim)?;
            let up = d.matrix(l.up, hidden, dim)?;
            let down = d.matrix(l.down, dim, hidden)?;
            let cache = c.seq_len as usize * kv as usize * F;
            let k_cache = d.alloc(cache)?;
            let v_cache = d.alloc(cache)?;
            d.layers.push(DeviceLayer {
                attn_norm,
                ffn_norm,
                k_cache,
                v_cache,
                wq,
                wk,
                wv,
                wo,
                gate,
                up,
                down,
            });
        }
        d.output_norm = d.upload(w.output_norm)?;
        d.classifier = match w.classifier {
            Some(bytes) => d.matrix(bytes, c.vocab_size, dim)?,
            None => Matrix {
                buffer: d.embedding,
                rows: c.vocab_size,
                cols: dim,
            },
        };
        let (dim_b, kv_b, hidden_b) = (dim as usize * F, kv as usize * F, hidden as usize * F);
        d.x = d.alloc(dim_b)?;
        d.residual = d.alloc(dim_b)?;
        d.xb = d.alloc(dim_b)?;
        d.q = d.alloc(dim_b)?;
        d.k = d.alloc(kv_b)?;
        d.v = d.alloc(kv_b)?;
        d.scores = d.alloc(c.seq_len as usize * F)?;
        d.attn_out = d.alloc(dim_b)?;
        d.hb = d.alloc(hidden_b)?;
        d.hb2 = d.alloc(hidden_b)?;
        d.logits = d.alloc(c.vocab_size as usize * F)?;
        Ok(d)
    }

    pub fn config(&self) -> Config {
        self.c
    }

    fn matvec(&self, m: &Matrix, x: &BufferHandle, out: &BufferHandle) -> Result<()> {
        self.b
            .quantized_matmul(&m.buffer, x, out, m.rows, m.cols, DType::F32)
    }

    fn layer_step(&self, l: &DeviceLayer, pos: u32) -> Result<()> {
        let (c, b) = (self.c, self.b);
        let (head_dim, kv_dim, seq_len) = (c.head_dim(), c.kv_dim(), pos + 1);
        let group = c.n_heads / c.n_kv_heads;
        let dim_bytes = c.dim as usize * F;
        b.copy_buffer(&self.x, &self.residual, dim_bytes)?;
        b.rms_norm(&self.x, &l.attn_norm, &self.xb, c.dim, c.eps)?;
        self.matvec(&l.wq, &self.xb, &self.q)?;
        self.matvec(&l.wk, &self.xb, &self.k)?;
        self.matvec(&l.wv, &self.xb, &self.v)?;
        b.rope(
            &self.q,
            &self.k,
            pos,
            head_dim,
            c.rope_base,
            c.n_heads,
            c.n_kv_heads,
        )?;
        let (at, kv_bytes) = (pos as usize * kv_dim as usize * F, kv_dim as usize * F);
        b.copy_buffer_offset(&self.k, &l.k_cache, 0, at, kv_bytes)?;
        b.copy_buffer_offset(&self.v, &l.v_cache, 0, at, kv_bytes)?;
        for h in 0..c.n_heads {
            let kv_off = h / group * head_dim;
            b.attn_score(
                &self.q,
                &l.k_cache,
                &self.scores,
                head_dim,
                seq_len,
                h * head_dim,
                kv_off,
                kv_dim,
            )?;
            b.softmax(&self.scores, &self.scores, seq_len)?;
            b.attn_value(
                &self.scores,
                &l.v_cache,
                &self.attn_out,
                head_dim,
                seq_len,
                kv_off,
                kv_dim,
                h * head_dim,
            )?;
        }
        self.matvec(&l.wo, &self.attn_out, &self.xb)?;
        b.add(&self.xb, &self.residual, &self.x, c.dim)?;
        b.copy_buffer(&self.x, &self.residual, dim_bytes)?;
        b.rms_norm(&self.x, &l.ffn_norm, &self.xb, c.dim, c.eps)?;
        self.matvec(&l.gate, &self.xb, &self.hb)?;
        self.matvec(&l.up, &self.xb, &self.hb2)?;
        b.silu(&self.hb, &self.hb, c.hidden_dim)?;
        b.element_mul(&self.hb, &self.hb2, &self.hb, c.hidden_dim)?;
        self.matvec(&l.down, &self.hb, &self.xb)?;
        b.add(&self.xb, &self.residual, &self.x, c.dim)
    }

    /// Runs `token` at `pos` (0..pos-1 ran before) and returns the vocab_size logits.
    pub fn step(&self, token: u32, pos: u32) -> Result<Vec<f32>> {
        let c = self.c;
        let dim_bytes = c.dim as usize * F;
        let row = token as usize * dim_bytes;
        self.b
            .copy_buffer_offset(&self.embedding, &self.x, row, 0, dim_bytes)?;
        for l in &self.layers {
            self.layer_step(l, pos)?;
        }
        self.b
            .rms_norm(&self.x, &self.output_norm, &self.xb, c.dim, c.eps)?;
        self.matvec(&self.classifier, &self.xb, &self.logits)?;
        let mut bytes = vec![0u8; c.vocab_size as usize * F];
        self.b.copy_from_device(&self.logits, &mut bytes)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect())
    }
}

impl<B: ComputeBackend + ?Sized> Drop for Decoder<'_, B> {
    fn drop(&mut self) {
        for &h in &self.owned {
            let _ = self.b.free(h);
        }
    }
}

/// The first index of the largest logit; a NaN loses to any number (Sampler.cpp's argmax).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0usize;
    for i in 1..logits.len() {
        if logits[i] > logits[best] || (logits[best].is_nan() && !logits[i].is_nan()) {
            best = i;
        }
    }
    best as u32
}

/// Greedy tokens from BOS (1) until BOS comes back, `steps` tokens, or the context is full.
pub fn generate_greedy<B: ComputeBackend + ?Sized>(
    d: &Decoder<'_, B>,
    steps: usize,
) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    let mut token = 1u32;
    for pos in 0..d.config().seq_len {
        let next = argmax(&d.step(token, pos)?);
        if next == 1 {
            break;
        }
        out.push(next);
        if out.len() >= steps {
            break;
        }
        token = next;
    }
    Ok(out)
}
