// RecordingBackend.h - a ComputeBackend that forwards to another and records each call.
//
// Tests use it to pin the decoder's call stream (names and integer arguments in order) and to
// count live buffers; it adds no behaviour of its own.
#ifndef SINTER_TESTS_UNIT_TOOLS_RECORDINGBACKEND_H
#define SINTER_TESTS_UNIT_TOOLS_RECORDINGBACKEND_H

#include <string>
#include <vector>

#include "sinter/ComputeBackend.h"

namespace sinter::model::testing {

class RecordingBackend final : public ComputeBackend {
public:
  struct Call {
    std::string name;
    std::vector<uint64_t> ints;
  };

  explicit RecordingBackend(ComputeBackend &inner) : inner_(inner) {}

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const Call &c : calls)
      out.push_back(c.name);
    return out;
  }
  size_t count(const std::string &name) const {
    size_t n = 0;
    for (const Call &c : calls)
      n += c.name == name;
    return n;
  }
  int live() const { return live_; }

  std::string name() const override { return "recording(" + inner_.name() + ")"; }
  DeviceInfo deviceInfo() const override { return inner_.deviceInfo(); }
  absl::StatusOr<BufferHandle> allocate(uint64_t size) override {
    absl::StatusOr<BufferHandle> h = inner_.allocate(size);
    live_ += h.ok();
    return h;
  }
  absl::Status free(BufferHandle h) override {
    absl::Status s = inner_.free(h);
    live_ -= s.ok();
    return s;
  }
  absl::Status matmul(BufferHandle a, BufferHandle b, BufferHandle out, uint32_t m, uint32_t n,
                      uint32_t k) override {
    record("matmul", {m, n, k});
    return inner_.matmul(a, b, out, m, n, k);
  }
  absl::Status softmax(BufferHandle in, BufferHandle out, uint32_t size) override {
    record("softmax", {size});
    return inner_.softmax(in, out, size);
  }
  absl::Status rmsNorm(BufferHandle in, BufferHandle w, BufferHandle out, uint32_t size,
                       float eps) override {
    record("rms_norm", {size});
    return inner_.rmsNorm(in, w, out, size, eps);
  }
  absl::Status rope(BufferHandle q, BufferHandle k, uint32_t pos, uint32_t headDim, float base,
                    uint32_t nq, uint32_t nk) override {
    record("rope", {pos, headDim, nq, nk});
    return inner_.rope(q, k, pos, headDim, base, nq, nk);
  }
  absl::Status silu(BufferHandle in, BufferHandle out, uint32_t size) override {
    record("silu", {size});
    return inner_.silu(in, out, size);
  }
  absl::Status elementMul(BufferHandle a, BufferHandle b, BufferHandle out,
                          uint32_t size) override {
    record("element_mul", {size});
    return inner_.elementMul(a, b, out, size);
  }
  absl::Status add(BufferHandle a, BufferHandle b, BufferHandle out, uint32_t size) override {
    record("add", {size});
    return inner_.add(a, b, out, size);
  }
  absl::Status copyToDevice(absl::Span<const uint8_t> data, BufferHandle h) override {
    record("copy_to_device", {data.size()});
    return inner_.copyToDevice(data, h);
  }
  absl::Status copyFromDevice(BufferHandle h, absl::Span<uint8_t> data) override {
    record("copy_from_device", {data.size()});
    return inner_.copyFromDevice(h, data);
  }
  absl::Status copyBuffer(BufferHandle src, BufferHandle dst, uint64_t size) override {
    record("copy_buffer", {size});
    return inner_.copyBuffer(src, dst, size);
  }
  absl::Status copyBufferOffset(BufferHandle src, BufferHandle dst, uint64_t so, uint64_t dO,
                                uint64_t size) override {
    record("copy_buffer_offset", {so, dO, size});
    return inner_.copyBufferOffset(src, dst, so, dO, size);
  }
  absl::Status synchronize() override { return inner_.synchronize(); }
  absl::Status attnScore(BufferHandle q, BufferHandle kc, BufferHandle s, uint32_t hd, uint32_t seq,
                         uint32_t ho, uint32_t ko, uint32_t ks) override {
    record("attn_score", {hd, seq, ho, ko, ks});
    return inner_.attnScore(q, kc, s, hd, seq, ho, ko, ks);
  }
  absl::Status attnValue(BufferHandle w, BufferHandle vc, BufferHandle out, uint32_t hd,
                         uint32_t seq, uint32_t ko, uint32_t ks, uint32_t oo) override {
    record("attn_value", {hd, seq, ko, ks, oo});
    return inner_.attnValue(w, vc, out, hd, seq, ko, ks, oo);
  }
  absl::Status quantizedMatmul(BufferHandle w, BufferHandle x, BufferHandle out, uint32_t rows,
                               uint32_t cols, DType dtype) override {
    record("quantized_matmul(" + dtypeName(dtype) + ")", {rows, cols});
    return inner_.quantizedMatmul(w, x, out, rows, cols, dtype);
  }

  std::vector<Call> calls;

private:
  void record(std::string name, std::vector<uint64_t> ints) {
    calls.push_back({std::move(name), std::move(ints)});
  }
  ComputeBackend &inner_;
  int live_ = 0;
};

} // namespace sinter::model::testing

#endif // SINTER_TESTS_UNIT_TOOLS_RECORDINGBACKEND_H
