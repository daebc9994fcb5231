// BenchOptions.h - the command line of sinter-bench.
#ifndef SINTER_TOOLS_SINTERBENCH_BENCHOPTIONS_H
#define SINTER_TOOLS_SINTERBENCH_BENCHOPTIONS_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/common/ModelSource.h"
#include "tools/common/ToolFlags.h"

namespace sinter::bench {

/// Everything sinter-bench was asked to do. A row is timed for every backend, depth and token
/// count (in that nesting).
struct BenchOptions {
  tools::ModelSource model; ///< -m/--model, --synthetic, --dtype, --seed
  /// --backend's kinds (checked names); empty: SINTER_BACKEND, else auto.
  std::vector<std::string> backends;
  tools::BackendFlags backend;         ///< --disable-fusion, --device, --fusion
  std::vector<uint32_t> tokens = {32}; ///< -n: tokens timed a repetition
  uint32_t repetitions = 5;            ///< -r
  std::vector<uint32_t> depths = {0};  ///< -d/--depth: positions filled before the timed ones
  std::optional<double> bandwidthGBps; ///< --bandwidth: the floor's bandwidth, GB/s
  bool json = false;                   ///< --json: one JSON object a row instead of the table
  bool help = false;                   ///< --help
};

/// Parses argv[1..argc): InvalidArgument naming the flag for an unknown flag, a bad number, a
/// count of 0, an unknown backend kind or preset, neither or both of --model and --synthetic, or
/// (for a preset, whose shape is known before it is generated) rows past its context.
absl::StatusOr<BenchOptions> parseBenchOptions(int argc, const char *const *argv);

/// InvalidArgument unless the deepest row fits a context of `seqLen` positions (its depth plus
/// its -n tokens).
absl::Status checkPositions(const BenchOptions &o, uint32_t seqLen);

/// The --help text.
std::string benchHelpText();

} // namespace sinter::bench

#endif // SINTER_TOOLS_SINTERBENCH_BENCHOPTIONS_H
