// DecodeStats.h - what the tools measure of a decode: the backend's counters (calls recorded,
// flushes, kernels launched, plans compiled and the time compiling them, queue submissions where
// the device counts them), the time and counters of a phase of decode steps (prompt, generation)
// with plan compilation kept apart, summary statistics, and a small JSON writer.
#ifndef SINTER_TOOLS_COMMON_DECODESTATS_H
#define SINTER_TOOLS_COMMON_DECODESTATS_H

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sinter/ComputeBackend.h"

namespace sinter::tools {

/// Counters of a backend so far. Only the lazy kinds (lazy, cpu, vulkan; eager or not) count.
struct BackendCounters {
  uint64_t calls = 0;                  ///< graph calls recorded
  uint64_t flushes = 0;                ///< traces run (each a plan: looked up, compiled on a miss)
  uint64_t kernels = 0;                ///< kernels the plans launched (dispatches on a GPU)
  uint64_t plansCompiled = 0;          ///< plan-cache misses
  double compileSeconds = 0;           ///< time compiling plans (fusion and code generation)
  std::optional<uint64_t> submissions; ///< queue submissions (the vulkan kind)
};
BackendCounters operator-(const BackendCounters &a, const BackendCounters &b);

/// The backend's counters, or nullopt for one that keeps none (the reference).
std::optional<BackendCounters> countersOf(const ComputeBackend &backend);

/// Decode steps of one kind (the prompt's, or generation's): their count, wall time, and the
/// backend counters over them. The time compiling plans is in `seconds` and also in
/// counters.compileSeconds; the rates leave it out.
struct Phase {
  uint32_t tokens = 0;
  double seconds = 0;
  BackendCounters counters;
  /// Wall time without plan compilation.
  double runSeconds() const;
  double msPerToken() const;
  double tokensPerSecond() const;
  /// counters / tokens (0 without tokens).
  double perToken(uint64_t counter) const;
};

/// Splits a decode's wall time into steps: mark() starts a step; add(phase) ends it, adding its
/// time and the backend's counters since mark() to `phase` (and starting the next step). Work
/// between add() and the next mark() (e.g. --check's reference decode) is in no phase.
class StepClock {
public:
  explicit StepClock(const ComputeBackend &backend) : backend_(backend) { mark(); }
  void mark();
  void add(Phase &phase);

private:
  using Clock = std::chrono::steady_clock;
  const ComputeBackend &backend_;
  Clock::time_point start_;
  BackendCounters before_;
};

/// Mean and sample standard deviation (0 for fewer than two values).
double mean(const std::vector<double> &values);
double stddev(const std::vector<double> &values);

/// One JSON object on one line: add fields in order, then str().
class JsonObject {
public:
  JsonObject &add(const std::string &key, const std::string &value);
  JsonObject &add(const std::string &key, const char *value) {
    return add(key, std::string(value));
  }
  JsonObject &add(const std::string &key, double value);
  JsonObject &add(const std::string &key, uint64_t value);
  JsonObject &add(const std::string &key, uint32_t value) { return add(key, uint64_t(value)); }
  JsonObject &add(const std::string &key, int value) { return add(key, int64_t(value)); }
  JsonObject &add(const std::string &key, int64_t value);
  JsonObject &add(const std::string &key, bool value);
  /// `json` as is (an object or array written by the caller).
  JsonObject &addRaw(const std::string &key, const std::string &json);
  JsonObject &addNull(const std::string &key);
  std::string str() const { return "{" + body_ + "}"; }

private:
  void key(const std::string &key);
  std::string body_;
};

/// `s` as a JSON string literal, quotes included.
std::string jsonString(const std::string &s);

} // namespace sinter::tools

#endif // SINTER_TOOLS_COMMON_DECODESTATS_H
