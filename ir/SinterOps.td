// SinterOps.td - one record per `sinter` op: the ComputeBackend operations and the structural ops.
//
// Each graph op carries its formula (SEMANTICS.md), its fusion class and the shared verifier.
// Element counts and element offsets are f32 elements; copy sizes and insert/extract offsets are
// bytes, as in SEMANTICS.md. Adding an op: one record here, one OpKind in support/Ops.h.

#ifndef SINTER_OPS_TD
#define SINTER_OPS_TD

include "SinterDialect.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

defvar Buf = Sinter_BufferType;

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def Sinter_MatmulOp : Sinter_GraphOp<"matmul", "Matmul",
    [Sinter_Contraction, AllTypesMatch<["out", "result"]>]> {
  let summary = "row-major matrix product";
  let description = [{
    `out[i*n+j] = sum_p a[i*k+p] * b[p*n+j]` for i < m, j < n. A is m x k, B is k x n (not
    transposed), out is m x n; the rest of `out` keeps its contents.

    ```mlir
    %r = sinter.matmul %a, %b into %out [m = %m, n = %n, k = %k]
        : !sinter.buffer<512>, !sinter.buffer<1024>, !sinter.buffer<256>
    ```
  }];
  let arguments = (ins Buf:$a, Buf:$b, Buf:$out, I64:$m, I64:$n, I64:$k);
  let results = (outs Buf:$result);
  let assemblyFormat = [{
    $a `,` $b `into` $out ` ` `[` `m` `=` $m `,` `n` `=` $n `,` `k` `=` $k `]` attr-dict
    `:` qualified(type($a)) `,` qualified(type($b)) `,` qualified(type($out))
  }];
}

def Sinter_QMatmulOp : Sinter_GraphOp<"qmatmul", "QuantizedMatmul",
    [Sinter_Contraction, AllTypesMatch<["out", "result"]>]> {
  let summary = "matrix-vector product with quantized weights";
  let description = [{
    `out[r] = sum_c W[r][c] * x[c]` for r < n_rows, c < n_cols. W holds n_rows rows of n_cols
    weights, each row a run of `dtype` blocks (GGUF layout), rows back to back. `dtype` is the
    GGUF type id, printed by name (`dtype = "Q4_0"`); n_cols must be a whole number of blocks.
  }];
  let arguments = (ins Buf:$weights, Buf:$x, Buf:$out, I64:$n_rows, I64:$n_cols, I32Attr:$dtype);
  let results = (outs Buf:$result);
  let assemblyFormat = [{
    $weights `,` $x `into` $out ` ` `[` `n_rows` `=` $n_rows `,` `n_cols` `=` $n_cols `,`
    `dtype` `=` custom<GgufDType>($dtype) `]` attr-dict
    `:` qualified(type($weights)) `,` qualified(type($x)) `,` qualified(type($out))
  }];
}

def Sinter_AttnScoreOp : Sinter_GraphOp<"attn_score", "AttnScore",
    [Sinter_Contraction, AllTypesMatch<["scores", "result"]>]> {
  let summary = "scaled attention scores of one head";
  let description = [{
    `scores[t] = (sum_d q[head_offset+d] * k_cache[t*kv_stride + kv_offset + d]) / sqrt(head_dim)`
    for t < seq_len, d < head_dim.
  }];
  let arguments = (ins Buf:$q, Buf:$k_cache, Buf:$scores, I64:$head_dim, I64:$seq_len,
                   I64:$head_offset, I64:$kv_offset, I64:$kv_stride);
  let results = (outs Buf:$result);
  let assemblyFormat = [{
    $q `,` $k_cache `into` $scores ` ` `[` `head_dim` `=` $head_dim `,` `seq_len` `=` $seq_len `,`
    `head_offset` `=` $head_offset `,` `kv_offset` `=` $kv_offset `,` `kv_stride` `=` $kv_stride
    `]` attr-dict `:` qualified(type($q)) `,` qualified(type($k_cache)) `,` qualified(type($scores))
  }];
}

def Sinter_AttnValueOp : Sinter_GraphOp<"attn_value", "AttnValue",
    [Sinter_Contraction, AllTypesMatch<["out", "result"]>]> {
  let summary = "attention-weighted sum of values of one head";
  let description = [{
    `out[out_offset+d] = sum_t weights[t] * v_cache[t*kv_stride + kv_offset + d]` for
    d < head_dim, t < seq_len (overwrites those elements).
  }];
  let arguments = (ins Buf:$weights, Buf:$v_cache, Buf:$out, I64:$head_dim, I64:$seq_len,
                   I64:$kv_offset, I64:$kv_stride, I64:$out_offset);
  let results = (outs Buf:$result);
  let assemblyFormat = [{
    $weights `,` $v_cache `into` $out ` ` `[` `head_dim` `=` $head_dim `,`
    `seq_len` `=` $seq_len `,` `kv_offset` `=` $kv_offset `,` `kv_stride` `=` $kv_stride `,`
    `out_offset` `=` $out_offset `]` attr-dict
    `:` qualified(type($weights)) `,` qualified(type($v_cache)) `,` qualified(type($out))
  }];
}

//===----------------------------------------------------------------------===//
// Row reductions
//===----------------------------------------------------------------------===//

def Sinter_SoftmaxOp : Sinter_GraphOp<"softmax", "Softmax",
    [Sinter_RowReduction, AllTypesMatch<["out", "result"]>]> {
  let summary = "softmax over the first `size` elements";
  let description = [{
    `out[i] = exp(in[i] - max) / sum_j exp(in[j] - max)` for i, j < size, max over in[0..size).
    `in` and `out` may be the same version.
  }];
  let arguments = (ins Buf:$in, Buf:$out, I64:$size);
  let results = (outs Buf:$result);
  let assemblyFormat = [{
    $in `into` $out ` ` `[` `size` `=` $size `]` attr-dict
    `:` qualified(type($in)) `,` qualified(type($out))
  }];
}

def Sinter_RmsNormOp : Sinter_GraphOp<"rms_norm", "RmsNorm",
    [Sinter_RowReduction, AllTypesMatch<["out", "result"]>]> {
  let summary = "root-mean-square normalization with a weight";
  let description = [{
    `out[i] = in[i] * weight[i] / sqrt(mean(in[0..size)^2) + eps)` for i < size (eps inside the
    root).
  }];
  let arguments = (ins Buf:$in, Buf:$weight, Buf:$out, I64:$size, F32Attr:$eps);
  let results = (outs Buf:$result);
  let assemblyFormat = [{
    $in `,` $weight `into` $out ` ` `[` `size` `=` $size `,` `eps` `=` $eps `]` attr-dict
    `:` qualified(type($in)) `,` qualified(type($weight)) `,` qualified(type($out))
  }];
}

//===----------------------------------------------------------------------===//
// Element-wise
//===----------------------------------------------------------------------===//

def Sinter_RopeOp : Sinter_GraphOp<"rope", "Rope",
    [Sinter_Elementwise, AllTypesMatch<["q", "q_result"]>, AllTypesMatch<["k", "k_result"]>]> {
  let summary = "rotary position embedding of q and k, in place";
  let description = [{
    Rotates the n_heads_q heads of q and the n_heads_k heads of k (each head_dim elements, heads
    contiguous). Within a head the pair (x, y) = (2i, 2i+1) turns by
    `theta = pos * freq_base^(-2i/head_dim)`: `x' = x*cos(theta) - y*sin(theta)`,
    `y' = x*sin(theta) + y*cos(theta)`. head_dim must be even. Returns the new versions of q and k.
  }];
  let arguments = (ins Buf:$q, Buf:$k, I64:$pos, I64:$head_dim, I64:$n_heads_q, I64:$n_heads_k,
                   F32Attr:$freq_base);
  let results = (outs Buf:$q_result, Buf:$k_result);
  let assemblyFormat = [{
    $q `,` $k ` ` `[` `pos` `=` $pos `,` `head_dim` `=` $head_dim `,` `n_heads_q` `=` $n_heads_q `,`
    `n_heads_k` `=` $n_heads_k `,` `freq_base` `=` $freq_base `]` attr-dict
    `:` qualified(type($q)) `,` qualified(type($k))
  }];
}

def Sinter_SiluOp : Sinter_GraphOp<"silu", "Silu",
    [Sinter_Elementwise, AllTypesMatch<["out", "result"]>]> {
  let summary = "sigmoid linear unit";
  let description = [{ `out[i] = in[i] / (1 + exp(-in[i]))` for i < size. }];
  let arguments = (ins Buf:$in, Buf:$out, I64:$size);
  let results = (outs Buf:$result);
  let assemblyFormat = [{
    $in `into` $out ` ` `[` `size` `=` $size `]` attr-dict
    `:` qualified(type($in)) `,` qualified(type($out))
  }];
}

def Sinter_ElementMulOp : Sinter_GraphOp<"element_mul", "ElementMul",
    [Sinter_Elementwise, AllTypesMatch<["out", "result"]>]> {
  let summary = "element-wise product";
  let description = [{ `out[i] = a[i] * b[i]` for i < size. }];
  let arguments = (ins Buf:$a, Buf:$b, Buf:$out, I64:$size);
  let results = (outs Buf:$result);
  let assemblyFormat = [{
    $a `,` $b `into` $out ` ` `[` `size` `=` $size `]` attr-dict
    `:` qualified(type($a)) `,` qualified(type($b)) `,` qualified(type($out))
  }];
}

def Sinter_AddOp : Sinter_GraphOp<"add", "Add",
    [Sinter_Elementwise, AllTypesMatch<["out", "result"]>]> {
  let summary = "element-wise sum";
  let description = [{ `out[i] = a[i] + b[i]` for i < size. }];
  let arguments = (ins Buf:$a, Buf:$b, Buf:$out, I64:$size);
  let results = (outs Buf:$result);
  let assemblyFormat = [{
    $a `,` $b `into` $out ` ` `[` `size` `=` $size `]` attr-dict
    `:` qualified(type($a)) `,` qualified(type($b)) `,` qualified(type($out))
  }];
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Sinter_CopyBufferOp : Sinter_GraphOp<"copy_buffer", "CopyBuffer",
    [Sinter_DataMovement, AllTypesMatch<["dst", "result"]>]> {
  let summary = "copy the first `size` bytes";
  let description = [{ `dst[0..size) = src[0..size)` in bytes. }];
  let arguments = (ins Buf:$src, Buf:$dst, I64:$size);
  let results = (outs Buf:$result);
  let assemblyFormat = [{
    $src `into` $dst ` ` `[` `size` `=` $size `]` attr-dict
    `:` qualified(type($src)) `,` qualified(type($dst))
  }];
}

def Sinter_CopyBufferOffsetOp : Sinter_GraphOp<"copy_buffer_offset", "CopyBufferOffset",
    [Sinter_DataMovement, AllTypesMatch<["dst", "result"]>]> {
  let summary = "copy a byte range between offsets";
  let description = [{
    `dst[dst_offset..dst_offset+size) = src[src_offset..src_offset+size)` in bytes. When `src` and
    `dst` are the same version, overlapping ranges behave like memmove.
  }];
  let arguments = (ins Buf:$src, Buf:$dst, I64:$src_offset, I64:$dst_offset, I64:$size);
  let results = (outs Buf:$result);
  let assemblyFormat = [{
    $src `into` $dst ` ` `[` `src_offset` `=` $src_offset `,` `dst_offset` `=` $dst_offset `,`
    `size` `=` $size `]` attr-dict `:` qualified(type($src)) `,` qualified(type($dst))
  }];
}

def Sinter_UploadOp : Sinter_Op<"upload",
    [Pure, Sinter_DataMovement, AllTypesMatch<["dst", "result"]>]> {
  let summary = "host bytes written at offset 0 (copy_to_device)";
  let description = [{
    `dst[0..size) = payload #N[0..size)` in bytes: the trace's N-th captured host payload. The rest
    of `dst` keeps its contents.
  }];
  let arguments = (ins I64Attr:$payload, Buf:$dst, I64:$size);
  let results = (outs Buf:$result);
  let hasVerifier = 1;
  let assemblyFormat = [{
    `payload` $payload `into` $dst ` ` `[` `size` `=` $size `]` attr-dict `:` qualified(type($dst))
  }];
}

def Sinter_ExtractOp : Sinter_Op<"extract", [Pure, Sinter_DataMovement]> {
  let summary = "byte sub-range of a buffer version";
  let description = [{
    `result[0..M) = source[offset..offset+M)` in bytes, M the result's size.

    ```mlir
    %s = sinter.extract %buf[%off] : !sinter.buffer<1024> -> !sinter.buffer<64>
    ```
  }];
  let arguments = (ins Buf:$source, I64:$offset);
  let results = (outs Buf:$result);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $source `[` $offset `]` attr-dict `:` qualified(type($source)) `->` qualified(type($result))
  }];
}

def Sinter_InsertOp : Sinter_Op<"insert",
    [Pure, Sinter_DataMovement, AllTypesMatch<["dest", "result"]>]> {
  let summary = "new version of a buffer with a byte sub-range replaced";
  let description = [{
    `result = dest` except `result[offset..offset+M) = value[0..M)` in bytes, M the value's size.

    ```mlir
    %b2 = sinter.insert %s into %buf[%off] : !sinter.buffer<64> into !sinter.buffer<1024>
    ```
  }];
  let arguments = (ins Buf:$value, Buf:$dest, I64:$offset);
  let results = (outs Buf:$result);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $value `into` $dest `[` $offset `]` attr-dict
    `:` qualified(type($value)) `into` qualified(type($dest))
  }];
}

//===----------------------------------------------------------------------===//
// Structure
//===----------------------------------------------------------------------===//

def Sinter_KernelOp : Sinter_Op<"kernel",
    [IsolatedFromAbove, SingleBlock, RecursiveMemoryEffects]> {
  let summary = "the ops of one fused kernel";
  let description = [{
    A region isolated from above, like IREE's dispatch regions: the values the kernel reads are
    captured as operands and appear as the block arguments; `sinter.yield` returns the buffer
    versions the kernel produces. `name` names the kernel in logs and dumps, `patterns` lists the
    fusion patterns that formed it (empty for a kernel of one op).

    ```mlir
    %r = sinter.kernel "rms_norm_qmatmul_0" patterns ["rmsnorm-qmatmul"]
        (%x = %0, %w = %1, %n = %c64) : (!sinter.buffer<256>, !sinter.buffer<256>, i64)
        -> (!sinter.buffer<256>) {
      ...
      sinter.yield %y : !sinter.buffer<256>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyTypeOf<[Buf, I64]>>:$inputs, StrAttr:$name,
                   StrArrayAttr:$patterns);
  let results = (outs Variadic<Buf>:$results);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The single block of the body.
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
  }];
}

def Sinter_YieldOp : Sinter_Op<"yield",
    [Pure, Terminator, ReturnLike, HasParent<"KernelOp">]> {
  let summary = "results of a sinter.kernel";
  let description = [{ Returns the kernel's result versions, in order. }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = [{ attr-dict ($values^ `:` qualified(type($values)))? }];
}

#endif // SINTER_OPS_TD
