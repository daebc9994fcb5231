// ConformanceRunner.cpp - runs one case on two backends and lists where they disagree.
//
// The comparison is per buffer and by role (see ConformanceRunner.h). Problems are returned as
// strings rather than asserted so the runner can itself be tested with deliberately wrong
// backends.
#include "tests/conformance/ConformanceRunner.h"

#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "backends/ReferenceBackend.h"
#include "support/Quant.h"
#include "tests/support/CallOp.h"
#include "tests/support/Nmse.h"
#include "tests/support/TestData.h"

namespace sinter::conformance {
namespace {

using Role = BufferSpec::Role;

uint32_t seedOf(const std::string &name) {
  uint32_t hash = 2166136261u; // FNV-1a: stable across runs and platforms
  for (unsigned char ch : name)
    hash = (hash ^ ch) * 16777619u;
  return hash;
}

std::vector<std::vector<uint8_t>> initialBytes(const ConformanceCase &c) {
  std::mt19937 rng(seedOf(c.name));
  std::vector<std::vector<uint8_t>> all;
  for (const BufferSpec &spec : c.buffers) {
    switch (spec.role) {
    case Role::Input:
      if (!spec.values.empty()) {
        all.push_back(test::floatBytes(spec.values));
      } else if (spec.sizeBytes % 4 == 0) {
        all.push_back(
            test::floatBytes(test::randomFloats(spec.sizeBytes / 4, rng, spec.lo, spec.hi)));
      } else {
        std::vector<uint8_t> bytes(spec.sizeBytes);
        for (uint8_t &b : bytes)
          b = static_cast<uint8_t>(rng());
        all.push_back(bytes);
      }
      break;
    case Role::Weights:
      all.push_back(test::randomWeights(spec.dtype, spec.rows, spec.cols, rng));
      break;
    case Role::Output:
    case Role::Temp:
      all.push_back(test::poisonBytes(spec.sizeBytes));
      break;
    }
  }
  return all;
}

// What one backend ends with: the bytes of every non-temp buffer (empty for temps).
struct Played {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<std::string> problems;
};

Played play(const ConformanceCase &c, const std::vector<std::vector<uint8_t>> &initial,
            ComputeBackend &backend, const std::string &who) {
  Played result;
  auto problem = [&](const std::string &what, const absl::Status &status) {
    result.problems.push_back(absl::StrCat(who, ": ", what, ": ", status.ToString()));
  };
  std::vector<BufferHandle> handles;
  for (size_t j = 0; j < c.buffers.size(); ++j) {
    absl::StatusOr<BufferHandle> h = backend.allocate(c.buffers[j].sizeBytes);
    if (!h.ok()) {
      problem(absl::StrCat("allocate buffer ", j), h.status());
      return result;
    }
    handles.push_back(*h);
    if (absl::Status s = backend.copyToDevice(initial[j], *h); !s.ok())
      problem(absl::StrCat("copy_to_device buffer ", j), s);
  }
  for (size_t i = 0; i < c.ops.size(); ++i) {
    OpCall op = c.ops[i];
    for (int b = 0; b < opInfo(op.kind).numBuffers; ++b)
      op.buffers[b] = handles[op.buffers[b].id - 1];
    if (absl::Status s = test::callOp(backend, op); !s.ok())
      problem(absl::StrCat("op ", i, " ", describeOp(c.ops[i])), s);
  }
  for (size_t j = 0; j < c.buffers.size(); ++j)
    if (c.buffers[j].role == Role::Temp)
      if (absl::Status s = backend.free(handles[j]); !s.ok())
        problem(absl::StrCat("free temp buffer ", j), s);
  if (absl::Status s = backend.synchronize(); !s.ok())
    problem("synchronize", s);
  result.bytes.resize(c.buffers.size());
  for (size_t j = 0; j < c.buffers.size(); ++j) {
    if (c.buffers[j].role == Role::Temp)
      continue;
    result.bytes[j].resize(c.buffers[j].sizeBytes);
    if (absl::Status s = backend.copyFromDevice(handles[j], absl::MakeSpan(result.bytes[j]));
        !s.ok())
      problem(absl::StrCat("copy_from_device buffer ", j), s);
    if (absl::Status s = backend.free(handles[j]); !s.ok())
      problem(absl::StrCat("free buffer ", j), s);
  }
  return result;
}

// Compares one float buffer; empty when it agrees.
std::string compareFloats(const std::vector<uint8_t> &got, const std::vector<uint8_t> &want,
                          double tolerance) {
  std::vector<float> g = test::bytesFloats(got), w = test::bytesFloats(want);
  std::vector<float> gWritten, wWritten;
  for (size_t i = 0; i < w.size(); ++i) {
    if (test::isPoison(w[i])) {
      if (!test::isPoison(g[i]))
        return absl::StrCat("element ", i, " was written (the reference leaves it alone): ", g[i]);
      continue;
    }
    gWritten.push_back(g[i]);
    wWritten.push_back(w[i]);
  }
  // A NaN the reference writes (from a NaN input) must be written as NaN too.
  ::testing::AssertionResult ok = test::nmseWithinMatchingNaN<float>(gWritten, wWritten, tolerance);
  return ok ? std::string() : ok.message();
}

} // namespace

std::vector<std::string> runConformanceCase(const ConformanceCase &c, ComputeBackend &backend) {
  std::vector<std::vector<uint8_t>> initial = initialBytes(c);
  ReferenceBackend oracle;
  Played want = play(c, initial, oracle, "reference");
  Played got = play(c, initial, backend, backend.name());
  std::vector<std::string> problems = want.problems; // a broken case is a problem too
  problems.insert(problems.end(), got.problems.begin(), got.problems.end());
  if (!problems.empty())
    return problems;
  for (size_t j = 0; j < c.buffers.size(); ++j) {
    const BufferSpec &spec = c.buffers[j];
    if (spec.role == Role::Temp)
      continue;
    bool exact = c.tolerance == 0 || spec.role == Role::Weights || spec.sizeBytes % 4 != 0;
    if (exact) {
      if (got.bytes[j] != want.bytes[j])
        problems.push_back(absl::StrCat("buffer ", j, " differs from the reference's bytes"));
      continue;
    }
    std::string diff = compareFloats(got.bytes[j], want.bytes[j], c.tolerance);
    if (!diff.empty())
      problems.push_back(absl::StrCat("buffer ", j, ": ", diff));
  }
  return problems;
}

} // namespace sinter::conformance
