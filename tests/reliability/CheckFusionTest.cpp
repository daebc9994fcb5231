// CheckFusionTest.cpp - SINTER_CHECK_FUSION on the lazy, cpu and vulkan kinds.
//
// A correct fused decode (the synthetic "micro" model: 2 layers, Q4_0, a few tokens) passes the
// check; the same decode with one fused kernel broken on purpose (fault site WrongResult, which
// changes a fused rms_norm's eps before the backend compiles the kernel) fails it with a short
// Internal error that names the launch and the buffer in sinter-dump's numbering, the largest
// absolute and relative difference, and a file holding the details.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/FaultInjection.h"
#include "tests/support/BackendKinds.h"
#include "tools/model/Decoder.h"
#include "tools/model/Synthetic.h"

namespace sinter::test {
namespace {

using runtime::fault::ScopedFault;
using runtime::fault::Site;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint32_t kSteps = 4;

// Sets an environment variable for the lifetime of the object.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_.empty())
      unsetenv(name_);
    else
      setenv(name_, old_.c_str(), 1);
  }

private:
  const char *name_;
  std::string old_;
};

// Greedy decode of kSteps tokens; the first error (a failed check surfaces at the logits read).
absl::Status decode(ComputeBackend &backend, const model::ModelWeights &weights) {
  absl::StatusOr<std::unique_ptr<model::Decoder>> decoder =
      model::Decoder::create(backend, weights);
  if (!decoder.ok())
    return decoder.status();
  uint32_t token = 1;
  for (uint32_t pos = 0; pos < kSteps; ++pos) {
    absl::StatusOr<std::vector<float>> logits = (*decoder)->step(token, pos);
    if (!logits.ok())
      return logits.status();
    uint32_t best = 0;
    for (uint32_t i = 1; i < logits->size(); ++i)
      if ((*logits)[i] > (*logits)[best])
        best = i;
    token = best;
  }
  return backend.synchronize();
}

const model::ModelWeights &microWeights() {
  static const model::ModelWeights *weights = [] {
    model::SyntheticOptions o;
    o.dtype = DType::Q4_0;
    o.threads = 1;
    absl::StatusOr<model::ModelWeights> w = model::generatePreset("micro", o);
    EXPECT_TRUE(w.ok()) << w.status();
    return new model::ModelWeights(w.ok() ? std::move(*w) : model::ModelWeights{});
  }();
  return *weights;
}

class CheckFusion : public ::testing::TestWithParam<const char *>, public BackendKindFixture {
protected:
  void SetUp() override {
    backend_ = make(BackendKind{GetParam(), backendOptions(GetParam())});
    if (!skipped().empty())
      GTEST_SKIP() << "no Vulkan device: " << skipped();
    ASSERT_NE(backend_, nullptr);
  }
  void TearDown() override {
    backend_.reset();
    expectNoValidationMessages();
  }

  ScopedEnv check_{"SINTER_CHECK_FUSION", "1"};
  std::unique_ptr<ComputeBackend> backend_;
};

TEST_P(CheckFusion, ACorrectFusedDecodePasses) {
  absl::Status s = decode(*backend_, microWeights());
  EXPECT_TRUE(s.ok()) << s;
}

TEST_P(CheckFusion, ABrokenFusedKernelFailsNamingTheLaunchAndTheBuffer) {
  ScopedFault fault(Site::WrongResult, 0, -1);
  absl::Status s = decode(*backend_, microWeights());
  ASSERT_GE(fault.fired(), 1u);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  const std::string message(s.message());
  std::printf("%s\n", message.c_str()); // what a user sees, for the test log
  // The launch and buffer, the differences, the file: no kernel lists on stderr.
  EXPECT_LE(std::count(message.begin(), message.end(), '\n'), 3) << message;
  EXPECT_LT(message.size(), 1500u) << message;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      message, m,
      std::regex("SINTER_CHECK_FUSION: fused and unfused results differ: kernel ([0-9]+) "
                 "\\(rms_norm[^)]*\\) last wrote %([0-9]+) \\(")))
      << message;
  const std::string kernel = m[1], slot = m[2];
  EXPECT_THAT(message, HasSubstr("largest absolute difference"));
  EXPECT_THAT(message, HasSubstr("largest relative difference"));
  EXPECT_THAT(message, HasSubstr("nmse"));
  std::smatch file;
  ASSERT_TRUE(std::regex_search(message, file, std::regex("are in (\\S+)"))) << message;
  std::ifstream in(file[1].str());
  ASSERT_TRUE(in) << file[1];
  std::stringstream details;
  details << in.rdbuf();
  const std::string text = details.str();
  EXPECT_THAT(text, HasSubstr("fused program:"));
  EXPECT_THAT(text, HasSubstr("unfused program:"));
  EXPECT_THAT(text, HasSubstr("eps=1)")); // the broken member, as the fused program lists it
  // The kernel the message names writes the buffer it names, in the same numbering.
  std::smatch line;
  ASSERT_TRUE(std::regex_search(text, line, std::regex("\nkernel " + kernel + " rms_norm[^\n]*\n")))
      << text;
  EXPECT_TRUE(std::regex_search(line.str(), std::regex("=%" + slot + "[,)]"))) << line.str();
  std::remove(file[1].str().c_str());
}

TEST_P(CheckFusion, WithoutTheCheckTheBrokenKernelGoesUnnoticed) {
  ScopedEnv off("SINTER_CHECK_FUSION", "0");
  ScopedFault fault(Site::WrongResult, 0, -1);
  absl::Status s = decode(*backend_, microWeights());
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_GE(fault.fired(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Kinds, CheckFusion, ::testing::Values("lazy", "cpu", "vulkan"),
                         [](const auto &info) { return std::string(info.param); });

} // namespace
} // namespace sinter::test
