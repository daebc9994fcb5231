// ConformanceTable.h - the op and fusion cases every backend must agree with the reference on.
//
// A case is a small program over numbered buffers: how each buffer starts (random floats, random
// weights of a dtype, poison), a list of OpCalls over them, and a tolerance. The runner
// (ConformanceRunner.h) plays it on a backend and on a fresh ReferenceBackend and compares. The
// multi-op cases are the chains the fusion passes rewrite (rms_norm -> quantized_matmul,
// quantized_matmul -> add, silu -> element_mul, score -> softmax -> value, ...), so fused and
// unfused execution are both checked against the same oracle.
#ifndef SINTER_TESTS_CONFORMANCE_CONFORMANCETABLE_H
#define SINTER_TESTS_CONFORMANCE_CONFORMANCETABLE_H

#include <cstdint>
#include <string>
#include <vector>

#include "sinter/DType.h"
#include "support/Ops.h"

namespace sinter::conformance {

/// How one buffer of a case starts and what happens to it.
struct BufferSpec {
  enum class Role : uint8_t {
    Input,   ///< random floats in [lo, hi); compared afterwards (must be unchanged unless written)
    Weights, ///< `rows` x `cols` random weights of `dtype`; compared byte for byte
    Output,  ///< poisoned; compared (elements the reference leaves poisoned must stay poisoned)
    Temp,    ///< poisoned; freed right after the ops are recorded, never read back
  };
  Role role = Role::Input;
  uint64_t sizeBytes = 0;
  float lo = -1.0f, hi = 1.0f;
  /// Input: these floats instead of random ones in [lo, hi) (rows at the ends of f32's range).
  std::vector<float> values;
  DType dtype = DType::F32;
  uint32_t rows = 0, cols = 0;
};

/// One conformance case. Ops name buffer j of `buffers` as BufferHandle{j + 1}.
struct ConformanceCase {
  std::string name; ///< unique; letters, digits and '_' only (it becomes a test name)
  std::vector<BufferSpec> buffers;
  std::vector<OpCall> ops;
  /// NMSE bound for float buffers (SEMANTICS.md); 0 means bit-exact.
  double tolerance = 1e-7;
};

/// Builds a case one buffer and one op at a time; the buffer functions return the handle that
/// ops use for the new buffer.
class CaseBuilder {
public:
  explicit CaseBuilder(std::string name) { case_.name = std::move(name); }

  BufferHandle input(uint64_t floats, float lo = -1.0f, float hi = 1.0f);
  /// An input holding exactly `values`.
  BufferHandle inputValues(std::vector<float> values);
  /// An input counted in bytes (for the byte-granular copies).
  BufferHandle inputBytes(uint64_t bytes);
  BufferHandle weights(DType dtype, uint32_t rows, uint32_t cols);
  /// An output of `floats` elements plus `margin` more that no op names.
  BufferHandle output(uint64_t floats, uint64_t margin = 3);
  BufferHandle temp(uint64_t floats);

  CaseBuilder &op(const OpCall &op);
  /// Sets the NMSE bound (0: bit-exact).
  CaseBuilder &tolerance(double t);
  ConformanceCase build() const { return case_; }

private:
  BufferHandle addBuffer(BufferSpec spec);
  ConformanceCase case_;
};

/// The table: every op kind, every Supported dtype, and the fusion chains.
const std::vector<ConformanceCase> &conformanceCases();

} // namespace sinter::conformance

#endif // SINTER_TESTS_CONFORMANCE_CONFORMANCETABLE_H
