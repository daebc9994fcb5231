// DecodeStats.cpp - backend counters, decode phases, statistics and JSON for the tools.
#include "tools/common/DecodeStats.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/EagerBackend.h"
#include "runtime/LazyBackend.h"

namespace sinter::tools {

BackendCounters operator-(const BackendCounters &a, const BackendCounters &b) {
  BackendCounters d;
  d.calls = a.calls - b.calls;
  d.flushes = a.flushes - b.flushes;
  d.kernels = a.kernels - b.kernels;
  d.plansCompiled = a.plansCompiled - b.plansCompiled;
  d.compileSeconds = a.compileSeconds - b.compileSeconds;
  if (a.submissions && b.submissions)
    d.submissions = *a.submissions - *b.submissions;
  return d;
}

std::optional<BackendCounters> countersOf(const ComputeBackend &backend) {
  std::optional<runtime::LazyStats> stats;
  if (auto *lazy = dynamic_cast<const runtime::LazyBackend *>(&backend))
    stats = lazy->stats();
  else if (auto *eager = dynamic_cast<const EagerBackend *>(&backend))
    stats = eager->stats();
  if (!stats)
    return std::nullopt;
  BackendCounters c;
  c.calls = stats->callsRecorded;
  c.flushes = stats->flushes;
  c.kernels = stats->kernelsLaunched;
  c.plansCompiled = stats->cache.misses;
  c.compileSeconds = stats->cache.compileSeconds;
  c.submissions = stats->submissions;
  return c;
}

double Phase::runSeconds() const { return std::max(0.0, seconds - counters.compileSeconds); }
double Phase::msPerToken() const { return tokens ? runSeconds() * 1e3 / tokens : 0.0; }
double Phase::tokensPerSecond() const {
  return tokens && runSeconds() > 0 ? tokens / runSeconds() : 0.0;
}
double Phase::perToken(uint64_t counter) const { return tokens ? double(counter) / tokens : 0.0; }

void StepClock::mark() {
  before_ = countersOf(backend_).value_or(BackendCounters());
  start_ = Clock::now();
}

void StepClock::add(Phase &phase) {
  const Clock::time_point end = Clock::now();
  const BackendCounters after = countersOf(backend_).value_or(BackendCounters());
  const BackendCounters d = after - before_;
  ++phase.tokens;
  phase.seconds += std::chrono::duration<double>(end - start_).count();
  BackendCounters &c = phase.counters;
  c.calls += d.calls;
  c.flushes += d.flushes;
  c.kernels += d.kernels;
  c.plansCompiled += d.plansCompiled;
  c.compileSeconds += d.compileSeconds;
  if (d.submissions)
    c.submissions = c.submissions.value_or(0) + *d.submissions;
  before_ = after;
  start_ = Clock::now();
}

double mean(const std::vector<double> &values) {
  double sum = 0;
  for (double v : values)
    sum += v;
  return values.empty() ? 0.0 : sum / values.size();
}

double stddev(const std::vector<double> &values) {
  if (values.size() < 2)
    return 0.0;
  const double m = mean(values);
  double sum = 0;
  for (double v : values)
    sum += (v - m) * (v - m);
  return std::sqrt(sum / (values.size() - 1));
}

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      absl::StrAppend(&out, "\\", std::string(1, char(c)));
    else if (c < 0x20)
      absl::StrAppendFormat(&out, "\\u%04x", c);
    else
      out += char(c);
  }
  return out + "\"";
}

void JsonObject::key(const std::string &key) {
  if (!body_.empty())
    body_ += ", ";
  absl::StrAppend(&body_, jsonString(key), ": ");
}

JsonObject &JsonObject::add(const std::string &k, const std::string &value) {
  key(k);
  body_ += jsonString(value);
  return *this;
}

JsonObject &JsonObject::add(const std::string &k, double value) {
  key(k);
  // Six significant digits; JSON has no NaN or infinity.
  body_ += std::isfinite(value) ? absl::StrFormat("%.6g", value) : "null";
  return *this;
}

JsonObject &JsonObject::add(const std::string &k, uint64_t value) {
  key(k);
  absl::StrAppend(&body_, value);
  return *this;
}

JsonObject &JsonObject::add(const std::string &k, int64_t value) {
  key(k);
  absl::StrAppend(&body_, value);
  return *this;
}

JsonObject &JsonObject::add(const std::string &k, bool value) {
  key(k);
  body_ += value ? "true" : "false";
  return *this;
}

JsonObject &JsonObject::addRaw(const std::string &k, const std::string &json) {
  key(k);
  body_ += json;
  return *this;
}

JsonObject &JsonObject::addNull(const std::string &k) { return addRaw(k, "null"); }

} // namespace sinter::tools
