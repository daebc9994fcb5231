// SinterBench.cpp - sinter-bench: the decode speed of a model on each backend asked for, one row a
// backend, depth and token count, as llama-bench prints it.
//
// A row: a decoder on the backend (one a backend, its KV cache long enough for every row), steps
// at positions up to the depth (untimed, the context), warm-up steps at the first timed positions
// (untimed: they compile the plans), then `r` repetitions of `n` steps at positions depth ..
// depth + n - 1, each timed on the wall clock. Plan compilation inside a repetition (none is
// expected) is left out of its time. Bytes a token are model::decodeBytesPerToken averaged over
// the timed positions; the floor fraction is bytes a token times tokens/s over the bandwidth:
// --bandwidth, else measured once a backend kind: on the host a streaming read
// (bench/ReadBandwidth.h), on a Vulkan device the decode benchmark's copy probe
// (bench/vulkan/CopyProbe.h, bytes read plus written a second).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/ReadBandwidth.h"
#include "bench/vulkan/CopyProbe.h"
#include "runtime/vulkan/VulkanDevice.h"
#include "sinter/Factory.h"
#include "sinter/Status.h"
#include "support/ThreadPool.h"
#include "tools/common/DecodeStats.h"
#include "tools/common/ModelSource.h"
#include "tools/model/Decoder.h"
#include "tools/sinter-bench/BenchOptions.h"

namespace sinter::bench {
namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// Steps of warm-up before a row's repetitions: two positions let the plan cache find the
/// position and token as parameters, a third runs the plan it then compiled.
constexpr uint32_t kWarmupSteps = 3;

struct Row {
  std::string model, backend, kind, device;
  uint32_t depth = 0, tokens = 0, repetitions = 0;
  std::vector<double> tokensPerSecond;            ///< one a repetition
  std::optional<tools::BackendCounters> counters; ///< over all repetitions
  double bytesPerToken = 0;
  std::optional<double> bandwidth; ///< bytes a second
  std::string bandwidthSource;     ///< where it came from
  double mean() const { return tools::mean(tokensPerSecond); }
  double sd() const { return tools::stddev(tokensPerSecond); }
  double perToken(uint64_t n) const { return double(n) / (double(tokens) * repetitions); }
  std::optional<double> floorFraction() const {
    if (!bandwidth)
      return std::nullopt;
    return mean() * bytesPerToken / *bandwidth;
  }
};

// The host's streaming read (bench/ReadBandwidth.h) on the shared pool's threads: the best of
// five passes after one that touches the array, measured once. Bytes a second.
double measureHostRead() {
  ThreadPool pool(ThreadPool::defaultSize());
  uint64_t sink = streamRead(pool);
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    const Clock::time_point t0 = Clock::now();
    sink += streamRead(pool);
    best = std::max(best, double(kStreamReadBytes) / secondsSince(t0));
  }
  return sink ? best : best; // the sum keeps the reads
}
double hostReadBandwidth() {
  static const double measured = measureHostRead();
  return measured;
}

// The copy bandwidth of the Vulkan device `device` (bench/vulkan/CopyProbe.h: bytes read plus
// written a second, the decode benchmark's floor), on a VulkanDevice of its own.
absl::StatusOr<double> vulkanCopyBandwidth(const Device &device) {
  runtime::vulkan::VulkanDeviceOptions options;
  options.deviceSelector = absl::StrCat(device.index);
  SINTER_ASSIGN_OR_RETURN(std::unique_ptr<runtime::vulkan::VulkanDevice> vk,
                          runtime::vulkan::VulkanDevice::create(options));
  return measureCopyBandwidth(*vk, 3);
}

// A decode step at `pos` with a token that changes with the position (so that the plans take it
// as a parameter, as in a real decode).
absl::Status stepAt(model::Decoder &decoder, uint32_t pos, std::vector<float> &logits) {
  const uint32_t token = 1 + pos % std::min<uint32_t>(3, decoder.config().vocabSize - 1);
  return decoder.step(token, pos, absl::MakeSpan(logits));
}

// The rows of one backend kind, in --depth then -n order.
absl::Status benchBackend(const BenchOptions &o, const std::string &kind,
                          const tools::LoadedModel &m, std::vector<Row> &rows) {
  SINTER_ASSIGN_OR_RETURN(BackendOptions bopts, tools::backendOptions(o.backend));
  if (!kind.empty())
    bopts.kind = kind;
  SINTER_ASSIGN_OR_RETURN(const BackendChoice choice, resolveBackend(bopts));
  SINTER_ASSIGN_OR_RETURN(std::unique_ptr<ComputeBackend> backend, createBackend(bopts));
  model::DecoderOptions dopts;
  dopts.maxContext = *absl::c_max_element(o.depths) + *absl::c_max_element(o.tokens);
  SINTER_ASSIGN_OR_RETURN(auto decoder, model::Decoder::create(*backend, m.weights, dopts));
  std::optional<double> bandwidth;
  std::string bandwidthSource = "--bandwidth";
  if (o.bandwidthGBps) {
    bandwidth = *o.bandwidthGBps * 1e9;
  } else if (choice.kind != "vulkan") {
    bandwidth = hostReadBandwidth();
    bandwidthSource = "a streaming read of the host's memory, measured now";
  } else {
    absl::StatusOr<double> copy = vulkanCopyBandwidth(choice.device);
    if (copy.ok()) {
      bandwidth = *copy;
      bandwidthSource = "the device's copy bandwidth, measured now by bench/vulkan/CopyProbe";
    } else { // no floor, but the speed still counts
      bandwidthSource = absl::StrCat("the copy probe failed: ", copy.status().message());
    }
  }
  std::vector<float> logits(m.weights.config.vocabSize);
  uint32_t filled = 0; // positions 0 .. filled-1 hold K/V
  std::vector<uint32_t> depths = o.depths;
  for (uint32_t depth : depths) {
    for (uint32_t n : o.tokens) {
      for (; filled < depth; ++filled)
        SINTER_RETURN_IF_ERROR(stepAt(*decoder, filled, logits));
      for (uint32_t i = 0; i < std::min(n, kWarmupSteps); ++i)
        SINTER_RETURN_IF_ERROR(stepAt(*decoder, depth + i, logits));
      filled = std::max(filled, depth + std::min(n, kWarmupSteps));
      Row row;
      row.model = m.shortName;
      row.backend = backend->name();
      row.kind = choice.kind;
      row.device = choice.device.name;
      row.depth = depth;
      row.tokens = n;
      row.repetitions = o.repetitions;
      row.bandwidth = bandwidth;
      row.bandwidthSource = bandwidthSource;
      for (uint32_t i = 0; i < n; ++i)
        row.bytesPerToken += double(model::decodeBytesPerToken(m.weights, depth + i)) / n;
      const std::optional<tools::BackendCounters> before = tools::countersOf(*backend);
      for (uint32_t r = 0; r < o.repetitions; ++r) {
        const std::optional<tools::BackendCounters> start = tools::countersOf(*backend);
        const Clock::time_point t0 = Clock::now();
        for (uint32_t i = 0; i < n; ++i)
          SINTER_RETURN_IF_ERROR(stepAt(*decoder, depth + i, logits));
        SINTER_RETURN_IF_ERROR(backend->synchronize());
        double seconds = secondsSince(t0);
        if (start) // a plan compiled inside a repetition does not count
          seconds -= (*tools::countersOf(*backend) - *start).compileSeconds;
        row.tokensPerSecond.push_back(seconds > 0 ? n / seconds : 0.0);
      }
      filled = std::max(filled, depth + n);
      if (before)
        row.counters = *tools::countersOf(*backend) - *before;
      rows.push_back(std::move(row));
    }
  }
  return absl::OkStatus();
}

std::string rowJson(const Row &r) {
  tools::JsonObject j;
  j.add("model", r.model).add("backend", r.backend).add("kind", r.kind).add("device", r.device);
  j.add("depth", r.depth).add("n", r.tokens).add("repetitions", r.repetitions);
  j.add("tokens_per_s", r.mean()).add("tokens_per_s_sd", r.sd());
  j.add("ms_per_token", r.mean() > 0 ? 1e3 / r.mean() : 0.0);
  if (r.counters) {
    j.add("calls_per_token", r.perToken(r.counters->calls));
    j.add("kernels_per_token", r.perToken(r.counters->kernels));
    j.add("flushes_per_token", r.perToken(r.counters->flushes));
  } else {
    j.addNull("calls_per_token").addNull("kernels_per_token").addNull("flushes_per_token");
  }
  if (r.counters && r.counters->submissions)
    j.add("submissions_per_token", r.perToken(*r.counters->submissions));
  else
    j.addNull("submissions_per_token");
  j.add("bytes_per_token", r.bytesPerToken);
  j.add("effective_GB_per_s", r.mean() * r.bytesPerToken / 1e9);
  if (r.bandwidth)
    j.add("bandwidth_GB_per_s", *r.bandwidth / 1e9).add("floor_fraction", *r.floorFraction());
  else
    j.addNull("bandwidth_GB_per_s").addNull("floor_fraction");
  j.add("bandwidth_source", r.bandwidthSource);
  return j.str();
}

// The table, its columns as wide as their widest cell.
void printTable(const std::vector<Row> &rows) {
  std::vector<std::vector<std::string>> cells = {{"model", "backend", "device", "depth", "n",
                                                  "tokens/s", "kernels/token", "MB/token",
                                                  "of the floor"}};
  for (const Row &r : rows) {
    std::string kernels = "-";
    if (r.counters) {
      kernels = absl::StrFormat("%.0f", r.perToken(r.counters->kernels));
      if (r.counters->submissions)
        absl::StrAppendFormat(&kernels, " (%.1f subm.)", r.perToken(*r.counters->submissions));
    }
    const std::optional<double> fraction = r.floorFraction();
    cells.push_back({r.model, r.backend, r.device, absl::StrCat(r.depth), absl::StrCat(r.tokens),
                     absl::StrFormat("%.2f ± %.2f", r.mean(), r.sd()), kernels,
                     absl::StrFormat("%.2f", r.bytesPerToken / 1e6),
                     fraction ? absl::StrFormat("%.3f", *fraction) : "-"});
  }
  std::vector<size_t> width(cells[0].size(), 0);
  auto length = [](const std::string &s) { // UTF-8 characters ("±" is two bytes)
    size_t n = 0;
    for (unsigned char c : s)
      n += (c & 0xc0) != 0x80;
    return n;
  };
  for (const auto &line : cells)
    for (size_t i = 0; i < line.size(); ++i)
      width[i] = std::max(width[i], length(line[i]));
  for (size_t l = 0; l < cells.size(); ++l) {
    std::string out = "|";
    for (size_t i = 0; i < cells[l].size(); ++i) {
      const std::string pad(width[i] - length(cells[l][i]), ' ');
      const bool right = i >= 3; // numbers
      absl::StrAppend(&out, " ", right ? pad : "", cells[l][i], right ? "" : pad, " |");
    }
    std::printf("%s\n", out.c_str());
    if (l == 0) {
      std::string rule = "|";
      for (size_t i = 0; i < width.size(); ++i)
        absl::StrAppend(
            &rule, i >= 3 ? std::string(width[i] + 1, '-') + ":" : std::string(width[i] + 2, '-'),
            "|");
      std::printf("%s\n", rule.c_str());
    }
  }
}

absl::Status run(const BenchOptions &o) {
  // Every backend is resolved before the model loads: a bad kind or device costs nothing.
  const std::vector<std::string> kinds =
      o.backends.empty() ? std::vector<std::string>{""} : o.backends;
  for (const std::string &kind : kinds) {
    SINTER_ASSIGN_OR_RETURN(BackendOptions bopts, tools::backendOptions(o.backend));
    if (!kind.empty())
      bopts.kind = kind;
    SINTER_RETURN_IF_ERROR(resolveBackend(bopts).status());
  }
  SINTER_ASSIGN_OR_RETURN(const tools::LoadedModel m, tools::loadModel(o.model));
  SINTER_RETURN_IF_ERROR(checkPositions(o, m.weights.config.seqLen));
  std::vector<Row> rows;
  for (const std::string &kind : kinds)
    SINTER_RETURN_IF_ERROR(benchBackend(o, kind, m, rows));
  if (o.json) {
    for (const Row &r : rows)
      std::printf("%s\n", rowJson(r).c_str());
    return absl::OkStatus();
  }
  printTable(rows);
  std::printf("\nmodel: %s\n", m.description.c_str());
  std::printf("%u repetitions a row (tokens/s: mean ± standard deviation), plan compilation not "
              "timed\n",
              o.repetitions);
  std::vector<std::string> floors; // one line a distinct bandwidth
  for (const Row &r : rows) {
    const std::string line = r.bandwidth
                                 ? absl::StrFormat("floor of %s: bytes a token over %.1f GB/s (%s)",
                                                   r.backend, *r.bandwidth / 1e9, r.bandwidthSource)
                                 : absl::StrFormat("floor of %s: none (%s; give --bandwidth GBPS)",
                                                   r.backend, r.bandwidthSource);
    if (!absl::c_linear_search(floors, line))
      floors.push_back(line);
  }
  for (const std::string &line : floors)
    std::printf("%s\n", line.c_str());
  return absl::OkStatus();
}

} // namespace
} // namespace sinter::bench

int main(int argc, char **argv) {
  absl::StatusOr<sinter::bench::BenchOptions> options =
      sinter::bench::parseBenchOptions(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr, "sinter-bench: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  if (options->help) {
    std::fputs(sinter::bench::benchHelpText().c_str(), stdout);
    return 0;
  }
  if (absl::Status s = sinter::bench::run(*options); !s.ok()) {
    std::fprintf(stderr, "sinter-bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
