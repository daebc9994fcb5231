// ConformanceTable.cpp - the conformance cases: single ops, every dtype, fusion chains, a layer.
//
// Shapes are chosen to hit edges a compiled kernel gets wrong: sizes that are not multiples of a
// workgroup (37, 1000), one-row matmuls (decode), grouped-query attention, unaligned byte copies,
// and outputs with a poisoned margin so that writes past the named elements are caught.
#include "tests/conformance/ConformanceTable.h"

#include <cassert>

#include "support/Quant.h"
#include "tests/support/RangeRows.h"

namespace sinter::conformance {

BufferHandle CaseBuilder::addBuffer(BufferSpec spec) {
  case_.buffers.push_back(spec);
  return BufferHandle{case_.buffers.size()};
}

BufferHandle CaseBuilder::input(uint64_t floats, float lo, float hi) {
  BufferSpec spec;
  spec.sizeBytes = floats * 4;
  spec.lo = lo;
  spec.hi = hi;
  return addBuffer(spec);
}

BufferHandle CaseBuilder::inputValues(std::vector<float> values) {
  BufferSpec spec;
  spec.sizeBytes = values.size() * 4;
  spec.values = std::move(values);
  return addBuffer(spec);
}

BufferHandle CaseBuilder::inputBytes(uint64_t bytes) {
  BufferSpec spec;
  spec.sizeBytes = bytes;
  return addBuffer(spec);
}

BufferHandle CaseBuilder::weights(DType dtype, uint32_t rows, uint32_t cols) {
  BufferSpec spec;
  spec.role = BufferSpec::Role::Weights;
  spec.dtype = dtype;
  spec.rows = rows;
  spec.cols = cols;
  const DTypeInfo &info = dtypeInfo(dtype);
  spec.sizeBytes = uint64_t(rows) * rowBytes(info, cols);
  // A backend may quantize the activations of a block-quantized product (SEMANTICS.md).
  if (info.blockSize > 1 && case_.tolerance < 5e-4)
    case_.tolerance = 5e-4;
  return addBuffer(spec);
}

BufferHandle CaseBuilder::output(uint64_t floats, uint64_t margin) {
  BufferSpec spec;
  spec.role = BufferSpec::Role::Output;
  spec.sizeBytes = (floats + margin) * 4;
  return addBuffer(spec);
}

BufferHandle CaseBuilder::temp(uint64_t floats) {
  BufferSpec spec;
  spec.role = BufferSpec::Role::Temp;
  spec.sizeBytes = floats * 4;
  return addBuffer(spec);
}

CaseBuilder &CaseBuilder::op(const OpCall &op) {
  case_.ops.push_back(op);
  return *this;
}

CaseBuilder &CaseBuilder::tolerance(double t) {
  case_.tolerance = t;
  return *this;
}

namespace {

using Cases = std::vector<ConformanceCase>;

void addElementwise(Cases &cases) {
  for (uint32_t n : {1u, 37u, 1000u}) {
    std::string s = std::to_string(n);
    CaseBuilder softmax("softmax_" + s);
    BufferHandle in = softmax.input(n, -30.0f, 30.0f), out = softmax.output(n);
    cases.push_back(softmax.op(ops::softmax(in, out, n)).build());
    CaseBuilder silu("silu_" + s);
    in = silu.input(n, -10.0f, 10.0f), out = silu.output(n);
    cases.push_back(silu.op(ops::silu(in, out, n)).build());
    CaseBuilder rms("rms_norm_" + s);
    in = rms.input(n);
    BufferHandle w = rms.input(n, 0.5f, 1.5f);
    out = rms.output(n);
    cases.push_back(rms.op(ops::rmsNorm(in, w, out, n, 1e-5f)).build());
    CaseBuilder mul("element_mul_" + s), add("add_" + s);
    BufferHandle a = mul.input(n), b = mul.input(n);
    out = mul.output(n);
    cases.push_back(mul.op(ops::elementMul(a, b, out, n)).build());
    a = add.input(n), b = add.input(n), out = add.output(n);
    cases.push_back(add.op(ops::add(a, b, out, n)).build());
  }
  // The in-place forms SEMANTICS.md allows.
  CaseBuilder inPlace("in_place_softmax_rms_norm_silu_mul_add");
  BufferHandle x = inPlace.input(256, -4.0f, 4.0f), w = inPlace.input(256, 0.5f, 1.5f);
  BufferHandle y = inPlace.input(256);
  inPlace.op(ops::rmsNorm(x, w, x, 256, 1e-6f))
      .op(ops::silu(x, x, 256))
      .op(ops::elementMul(x, y, y, 256))
      .op(ops::add(y, y, y, 256))
      .op(ops::softmax(y, y, 256));
  cases.push_back(inPlace.build());
}

void addMatmulAndCopies(Cases &cases) {
  struct Shape {
    uint32_t m, n, k;
  };
  for (Shape s : {Shape{1, 64, 64}, Shape{7, 13, 33}, Shape{16, 16, 16}, Shape{3, 1, 100}}) {
    CaseBuilder c("matmul_" + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                  std::to_string(s.k));
    BufferHandle a = c.input(s.m * s.k), b = c.input(s.k * s.n), out = c.output(s.m * s.n);
    cases.push_back(c.op(ops::matmul(a, b, out, s.m, s.n, s.k)).build());
  }
  CaseBuilder copy("copy_buffer_1001_bytes");
  BufferHandle src = copy.inputBytes(1001), dst = copy.output(300);
  cases.push_back(copy.op(ops::copyBuffer(src, dst, 1001)).tolerance(0).build());
  CaseBuilder offset("copy_buffer_offset_unaligned");
  src = offset.inputBytes(400), dst = offset.output(100);
  cases.push_back(offset.op(ops::copyBufferOffset(src, dst, 3, 7, 101))
                      .op(ops::copyBufferOffset(src, dst, 0, 396, 4))
                      .tolerance(0)
                      .build());
  CaseBuilder overlap("copy_buffer_offset_overlap_both_ways");
  BufferHandle buf = overlap.inputBytes(512);
  cases.push_back(overlap.op(ops::copyBufferOffset(buf, buf, 0, 5, 300))
                      .op(ops::copyBufferOffset(buf, buf, 9, 1, 400))
                      .tolerance(0)
                      .build());
}

void addRopeAndAttention(Cases &cases) {
  struct RopeShape {
    uint32_t headDim, nq, nk, pos;
    float base;
  };
  for (RopeShape r : {RopeShape{64, 8, 2, 0, 10000.0f}, RopeShape{64, 8, 2, 123, 10000.0f},
                      RopeShape{128, 32, 8, 4095, 500000.0f}, RopeShape{2, 3, 0, 7, 10000.0f}}) {
    CaseBuilder c("rope_hd" + std::to_string(r.headDim) + "_q" + std::to_string(r.nq) + "_k" +
                  std::to_string(r.nk) + "_pos" + std::to_string(r.pos));
    // One head more in each buffer than the op names: it must not move.
    BufferHandle q = c.input((r.nq + 1) * r.headDim), k = c.input((r.nk + 1) * r.headDim);
    cases.push_back(c.op(ops::rope(q, k, r.pos, r.headDim, r.base, r.nq, r.nk)).build());
  }
  // Grouped-query layout [pos][kv_head][head_dim]: 8 query heads over 2 KV heads.
  const uint32_t nHeads = 8, nKv = 2, hd = 64, seq = 17, stride = nKv * hd;
  CaseBuilder score("attn_score_gqa"), value("attn_value_gqa"), attention("attention_gqa");
  BufferHandle q = score.input(nHeads * hd), kc = score.input(seq * stride);
  BufferHandle w = value.input(seq, 0.0f, 1.0f), vc = value.input(seq * stride);
  BufferHandle out = value.output(nHeads * hd);
  BufferHandle aq = attention.input(nHeads * hd), akc = attention.input(seq * stride);
  BufferHandle avc = attention.input(seq * stride), aout = attention.output(nHeads * hd);
  for (uint32_t h = 0; h < nHeads; ++h) {
    uint32_t kvOff = h / (nHeads / nKv) * hd;
    score.op(ops::attnScore(q, kc, score.output(seq), hd, seq, h * hd, kvOff, stride));
    value.op(ops::attnValue(w, vc, out, hd, seq, kvOff, stride, h * hd));
    BufferHandle s = attention.temp(seq);
    attention.op(ops::attnScore(aq, akc, s, hd, seq, h * hd, kvOff, stride))
        .op(ops::softmax(s, s, seq))
        .op(ops::attnValue(s, avc, aout, hd, seq, kvOff, stride, h * hd));
  }
  cases.push_back(score.build());
  cases.push_back(value.build());
  cases.push_back(attention.build());
}

void addQuantizedMatmul(Cases &cases) {
  for (uint32_t id = 0; id < 64; ++id) {
    const DTypeInfo *info = lookupDType(id);
    if (!info || info->support != DTypeSupport::Supported)
      continue;
    for (uint32_t rows : {1u, 19u}) {
      const uint32_t cols = 512;
      CaseBuilder c(std::string("quantized_matmul_") + info->name + "_" + std::to_string(rows) +
                    "x" + std::to_string(cols));
      BufferHandle w = c.weights(info->dtype, rows, cols), x = c.input(cols);
      BufferHandle out = c.output(rows);
      cases.push_back(c.op(ops::quantizedMatmul(w, x, out, rows, cols, info->dtype)).build());
    }
  }
}

// The chains the fusion passes rewrite, with intermediates as temps that are freed right after
// recording (so a fused backend need not materialize them).
void addFusionChains(Cases &cases) {
  const uint32_t dim = 256, ffn = 512;
  for (DType dt : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::F16}) {
    std::string name = dtypeName(dt);
    CaseBuilder norm("rms_norm_then_quantized_matmul_" + name);
    BufferHandle x = norm.input(dim), g = norm.input(dim, 0.5f, 1.5f), xn = norm.temp(dim);
    BufferHandle w = norm.weights(dt, ffn, dim), out = norm.output(ffn);
    cases.push_back(norm.op(ops::rmsNorm(x, g, xn, dim, 1e-5f))
                        .op(ops::quantizedMatmul(w, xn, out, ffn, dim, dt))
                        .build());

    CaseBuilder residual("quantized_matmul_then_add_" + name);
    x = residual.input(dim);
    BufferHandle r = residual.input(dim), y = residual.temp(dim);
    w = residual.weights(dt, dim, dim), out = residual.output(dim);
    cases.push_back(residual.op(ops::quantizedMatmul(w, x, y, dim, dim, dt))
                        .op(ops::add(r, y, out, dim))
                        .build());

    CaseBuilder horizontal("horizontal_quantized_matmuls_" + name);
    x = horizontal.input(dim);
    for (uint32_t rows : {dim, 128u, 128u}) {
      BufferHandle wi = horizontal.weights(dt, rows, dim);
      horizontal.op(ops::quantizedMatmul(wi, x, horizontal.output(rows), rows, dim, dt));
    }
    cases.push_back(horizontal.build());

    CaseBuilder swiglu("swiglu_" + name);
    x = swiglu.input(dim);
    BufferHandle wg = swiglu.weights(dt, ffn, dim), wu = swiglu.weights(dt, ffn, dim);
    BufferHandle wd = swiglu.weights(dt, dim, ffn);
    BufferHandle gate = swiglu.temp(ffn), up = swiglu.temp(ffn), hidden = swiglu.temp(ffn);
    out = swiglu.output(dim);
    cases.push_back(swiglu.op(ops::quantizedMatmul(wg, x, gate, ffn, dim, dt))
                        .op(ops::quantizedMatmul(wu, x, up, ffn, dim, dt))
                        .op(ops::silu(gate, gate, ffn))
                        .op(ops::elementMul(gate, up, hidden, ffn))
                        .op(ops::quantizedMatmul(wd, hidden, out, dim, ffn, dt))
                        .build());
  }
  CaseBuilder siluMul("silu_then_element_mul");
  BufferHandle a = siluMul.input(1000, -6.0f, 6.0f), b = siluMul.input(1000);
  BufferHandle t = siluMul.temp(1000), out = siluMul.output(1000);
  cases.push_back(siluMul.op(ops::silu(a, t, 1000)).op(ops::elementMul(t, b, out, 1000)).build());
  CaseBuilder elementwise("elementwise_chain");
  a = elementwise.input(777), b = elementwise.input(777);
  BufferHandle c = elementwise.input(777), t1 = elementwise.temp(777);
  BufferHandle t2 = elementwise.temp(777);
  out = elementwise.output(777);
  cases.push_back(elementwise.op(ops::add(a, b, t1, 777))
                      .op(ops::elementMul(t1, c, t2, 777))
                      .op(ops::add(t2, a, out, 777))
                      .build());
}

// rms_norm over rows at the ends of f32's range (tests/support/RangeRows.h): alone, and feeding
// quantized_matmuls of F32, Q4_0 and Q8_0 weights as the fusion pass folds it (the normalized
// vector is an output too, so the fused kernels' copy of it is compared). 64 rows: int8 x where
// a Vulkan device has integer dot products. Sizes that are not multiples of 16 exercise the
// kernels' remainders. Rows whose normalized values are not finite (NaN, inf) or tiny
// (subnormal x with eps > 0: about 1e-37) feed only F32 weights here: unfused, a Q4_0/Q8_0
// product that quantizes x to int8 turns NaN into a number and overflows its 127 / max|x| below
// 3.7e-37, a limit of quantized_matmul's own and not of the norm's; SpirvFusedKernelTest and
// CpuCompilerTest run those rows through the fused int8 kernels.
void addRmsNormRange(Cases &cases) {
  struct Sizes {
    uint32_t alone, fused;
  };
  const std::vector<Sizes> sizes = {{4096, 4096}, {1000, 1024}, {1000, 1024}, {4096, 4096},
                                    {777, 768},   {777, 768},   {256, 256},   {250, 256}};
  const uint32_t rows = 64;
  assert(sizes.size() == test::rangeRows().size() && "a size for every row");
  for (size_t k = 0; k < test::rangeRows().size(); ++k) {
    const test::RangeRow &row = test::rangeRows()[k];
    const std::string name = std::string("rms_norm_range_") + row.name;
    CaseBuilder alone(name + "_" + std::to_string(sizes[k].alone));
    BufferHandle x = alone.inputValues(test::rangeRowValues(row.kind, sizes[k].alone));
    BufferHandle g = alone.input(sizes[k].alone, 0.5f, 1.5f), out = alone.output(sizes[k].alone);
    cases.push_back(alone.op(ops::rmsNorm(x, g, out, sizes[k].alone, row.eps)).build());
    const uint32_t cols = sizes[k].fused;
    const bool tinyOrNotFinite = row.kind == test::RangeRow::Kind::WithNaN ||
                                 row.kind == test::RangeRow::Kind::WithInf ||
                                 (row.kind == test::RangeRow::Kind::Subnormal && row.eps > 0);
    for (DType dt : {DType::F32, DType::Q4_0, DType::Q8_0}) {
      if (tinyOrNotFinite && dt != DType::F32)
        continue;
      CaseBuilder fused(name + "_then_quantized_matmul_" + dtypeName(dt));
      x = fused.inputValues(test::rangeRowValues(row.kind, cols));
      g = fused.input(cols, 0.5f, 1.5f);
      BufferHandle xn = fused.output(cols), w = fused.weights(dt, rows, cols);
      out = fused.output(rows);
      cases.push_back(fused.op(ops::rmsNorm(x, g, xn, cols, row.eps))
                          .op(ops::quantizedMatmul(w, xn, out, rows, cols, dt))
                          .build());
    }
  }
}

// A small llama decode layer at position 5: norm, q/k/v projections, rope, KV-cache writes,
// grouped-query attention, output projection, residual, norm, SwiGLU, residual.
ConformanceCase decodeLayer(DType dt) {
  const uint32_t dim = 256, nHeads = 4, nKv = 2, hd = 64, ffn = 512, pos = 5, maxSeq = 8;
  const uint32_t kvDim = nKv * hd, seq = pos + 1;
  CaseBuilder c("decode_layer_" + dtypeName(dt));
  BufferHandle x = c.input(dim), attnNorm = c.input(dim, 0.5f, 1.5f);
  BufferHandle ffnNorm = c.input(dim, 0.5f, 1.5f);
  BufferHandle wq = c.weights(dt, dim, dim), wk = c.weights(dt, kvDim, dim);
  BufferHandle wv = c.weights(dt, kvDim, dim), wo = c.weights(dt, dim, dim);
  BufferHandle wg = c.weights(dt, ffn, dim), wu = c.weights(dt, ffn, dim);
  BufferHandle wd = c.weights(dt, dim, ffn);
  BufferHandle kCache = c.input(maxSeq * kvDim), vCache = c.input(maxSeq * kvDim);
  BufferHandle xn = c.temp(dim), q = c.temp(dim), k = c.temp(kvDim), v = c.temp(kvDim);
  BufferHandle attnOut = c.temp(dim), o = c.temp(dim), h1 = c.temp(dim), hn = c.temp(dim);
  BufferHandle gate = c.temp(ffn), up = c.temp(ffn), down = c.temp(dim);
  BufferHandle out = c.output(dim);
  c.op(ops::rmsNorm(x, attnNorm, xn, dim, 1e-5f))
      .op(ops::quantizedMatmul(wq, xn, q, dim, dim, dt))
      .op(ops::quantizedMatmul(wk, xn, k, kvDim, dim, dt))
      .op(ops::quantizedMatmul(wv, xn, v, kvDim, dim, dt))
      .op(ops::rope(q, k, pos, hd, 10000.0f, nHeads, nKv))
      .op(ops::copyBufferOffset(k, kCache, 0, uint64_t(pos) * kvDim * 4, kvDim * 4))
      .op(ops::copyBufferOffset(v, vCache, 0, uint64_t(pos) * kvDim * 4, kvDim * 4));
  for (uint32_t h = 0; h < nHeads; ++h) {
    uint32_t kvOff = h / (nHeads / nKv) * hd;
    BufferHandle s = c.temp(seq);
    c.op(ops::attnScore(q, kCache, s, hd, seq, h * hd, kvOff, kvDim))
        .op(ops::softmax(s, s, seq))
        .op(ops::attnValue(s, vCache, attnOut, hd, seq, kvOff, kvDim, h * hd));
  }
  c.op(ops::quantizedMatmul(wo, attnOut, o, dim, dim, dt))
      .op(ops::add(x, o, h1, dim))
      .op(ops::rmsNorm(h1, ffnNorm, hn, dim, 1e-5f))
      .op(ops::quantizedMatmul(wg, hn, gate, ffn, dim, dt))
      .op(ops::quantizedMatmul(wu, hn, up, ffn, dim, dt))
      .op(ops::silu(gate, gate, ffn))
      .op(ops::elementMul(gate, up, gate, ffn))
      .op(ops::quantizedMatmul(wd, gate, down, dim, ffn, dt))
      .op(ops::add(h1, down, out, dim));
  return c.build();
}

Cases makeCases() {
  Cases cases;
  addElementwise(cases);
  addMatmulAndCopies(cases);
  addRopeAndAttention(cases);
  addQuantizedMatmul(cases);
  addFusionChains(cases);
  addRmsNormRange(cases);
  for (DType dt : {DType::Q4_K, DType::Q8_0, DType::F16})
    cases.push_back(decodeLayer(dt));
  return cases;
}

} // namespace

const std::vector<ConformanceCase> &conformanceCases() {
  static const std::vector<ConformanceCase> *cases = new std::vector<ConformanceCase>(makeCases());
  return *cases;
}

} // namespace sinter::conformance
