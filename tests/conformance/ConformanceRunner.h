// ConformanceRunner.h - plays a conformance case on a backend and on the reference, and compares.
//
// Both backends get the same initial bytes (random inputs and weights from a seed derived from the
// case name, or the case's own values; poisoned outputs and temps). Temps are freed right after
// the ops are recorded, as an engine frees scratch buffers. Afterwards every other buffer is read
// back: float buffers must agree within the case's NMSE (and be NaN where the reference's are),
// elements the reference left poisoned must still be poisoned bit for bit, weights and bit-exact
// cases must match byte for byte.
#ifndef SINTER_TESTS_CONFORMANCE_CONFORMANCERUNNER_H
#define SINTER_TESTS_CONFORMANCE_CONFORMANCERUNNER_H

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sinter/ComputeBackend.h"
#include "tests/conformance/ConformanceTable.h"

namespace sinter::conformance {

/// Builds a fresh backend under test.
using BackendFactory = std::function<absl::StatusOr<std::unique_ptr<ComputeBackend>>()>;

/// Runs `c` on `backend` and on a fresh ReferenceBackend. Returns one line per problem (a call
/// that failed, a buffer that disagrees); empty when the backend conforms.
std::vector<std::string> runConformanceCase(const ConformanceCase &c, ComputeBackend &backend);

} // namespace sinter::conformance

#endif // SINTER_TESTS_CONFORMANCE_CONFORMANCERUNNER_H
