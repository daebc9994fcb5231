// ToolsCommonTest.cpp - tests of tools/common (what sinter-run and sinter-bench share) and of
// model::decodeBytesPerToken.
//
// The counters must come from the lazy kinds and not from the reference, a phase must keep plan
// compilation out of its rates, the statistics and JSON must be exact, and the flags must reject
// what they document rejecting.
#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_split.h"
#include "sinter/Factory.h"
#include "tools/common/DecodeStats.h"
#include "tools/common/ModelSource.h"
#include "tools/common/ToolFlags.h"
#include "tools/model/Decoder.h"
#include "tools/model/Synthetic.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sinter::tools {
namespace {

using ::testing::HasSubstr;

TEST(DecodeStatsTest, MeanAndSampleStandardDeviation) {
  EXPECT_EQ(mean({}), 0.0);
  EXPECT_EQ(stddev({5.0}), 0.0);
  EXPECT_DOUBLE_EQ(mean({1, 2, 3, 6}), 3.0);
  EXPECT_DOUBLE_EQ(stddev({2, 4, 4, 4, 5, 5, 7, 9}), std::sqrt(32.0 / 7));
}

TEST(DecodeStatsTest, JsonObjectEscapesAndWritesNullForNonFinite) {
  JsonObject j;
  j.add("s", "a\"b\\c\n").add("n", uint64_t(7)).add("x", 0.5).add("neg", -3);
  j.add("inf", std::numeric_limits<double>::infinity()).add("t", true).addNull("z");
  j.addRaw("o", JsonObject().add("k", uint32_t(1)).str());
  EXPECT_EQ(j.str(), "{\"s\": \"a\\\"b\\\\c\\u000a\", \"n\": 7, \"x\": 0.5, \"neg\": -3, "
                     "\"inf\": null, \"t\": true, \"z\": null, \"o\": {\"k\": 1}}");
}

TEST(DecodeStatsTest, PhaseLeavesCompilationOut) {
  Phase p;
  p.tokens = 4;
  p.seconds = 3.0;
  p.counters.compileSeconds = 1.0;
  p.counters.kernels = 40;
  EXPECT_DOUBLE_EQ(p.runSeconds(), 2.0);
  EXPECT_DOUBLE_EQ(p.msPerToken(), 500.0);
  EXPECT_DOUBLE_EQ(p.tokensPerSecond(), 2.0);
  EXPECT_DOUBLE_EQ(p.perToken(p.counters.kernels), 10.0);
  EXPECT_EQ(Phase().tokensPerSecond(), 0.0);
}

model::ModelWeights nano() {
  absl::StatusOr<model::ModelWeights> w = model::generatePreset("nano", {});
  EXPECT_TRUE(w.ok()) << w.status();
  return std::move(*w);
}

// Decodes `steps` positions on `kind`, the first into `first`, the rest into `rest`.
std::optional<BackendCounters> decodeOn(const std::string &kind, int steps, Phase &first,
                                        Phase &rest) {
  BackendOptions options;
  options.kind = kind;
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = createBackend(options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  const model::ModelWeights w = nano();
  auto decoder = model::Decoder::create(**backend, w);
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  StepClock clock(**backend);
  for (int pos = 0; pos < steps; ++pos) {
    EXPECT_TRUE((*decoder)->step(1 + pos % 3, pos).ok());
    clock.add(pos == 0 ? first : rest);
  }
  return countersOf(**backend);
}

TEST(DecodeStatsTest, LazyKindsCountAndTheReferenceDoesNot) {
  Phase first, rest;
  std::optional<BackendCounters> c = decodeOn("lazy", 5, first, rest);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(first.tokens, 1u);
  EXPECT_EQ(rest.tokens, 4u);
  EXPECT_EQ(c->flushes, 5u);
  EXPECT_EQ(rest.counters.flushes, 4u);
  EXPECT_GT(rest.counters.calls, 0u);
  EXPECT_EQ(rest.counters.calls % 4, 0u); // the same calls every token
  EXPECT_GT(rest.counters.kernels, 0u);
  EXPECT_GE(first.counters.plansCompiled, 1u);
  EXPECT_EQ(c->plansCompiled, first.counters.plansCompiled + rest.counters.plansCompiled);
  EXPECT_GT(first.counters.compileSeconds, 0.0);
  EXPECT_LE(first.counters.compileSeconds, first.seconds);
  EXPECT_FALSE(c->submissions.has_value()); // the host has no queue

  Phase refFirst, refRest;
  EXPECT_FALSE(decodeOn("reference", 2, refFirst, refRest).has_value());
  EXPECT_EQ(refRest.tokens, 1u);
  EXPECT_EQ(refRest.counters.calls, 0u);
}

TEST(DecodeBytesTest, WeightsOnceEmbeddingRowAndKvUpToThePosition) {
  const model::ModelWeights w = nano();
  uint64_t weights = 0;
  for (const model::NamedTensor &nt : model::namedTensors(w))
    weights += nt.tensor->data.size();
  const model::ModelConfig &c = w.config;
  const uint64_t row = w.tokenEmbedding.data.size() / w.tokenEmbedding.rows;
  // The embedding is read whole only as the classifier (nano has a classifier of its own).
  ASSERT_FALSE(w.sharedClassifier());
  const uint64_t read = weights - w.tokenEmbedding.data.size();
  const uint64_t kvPerPosition = 2ull * c.nLayers * c.kvDim() * 4;
  EXPECT_EQ(model::decodeBytesPerToken(w, 0), read + row + kvPerPosition);
  EXPECT_EQ(model::decodeBytesPerToken(w, 9) - model::decodeBytesPerToken(w, 0), 9 * kvPerPosition);
}

TEST(ModelSourceTest, ExactlyOneSourceAndAKnownPreset) {
  ModelSource s;
  EXPECT_THAT(checkModelSource(s).message(), HasSubstr("exactly one of --model"));
  s.synthetic = "nano";
  EXPECT_TRUE(checkModelSource(s).ok());
  s.path = "x.bin";
  EXPECT_FALSE(checkModelSource(s).ok());
  s.path.clear();
  s.synthetic = "giant";
  EXPECT_THAT(checkModelSource(s).message(),
              HasSubstr("--synthetic: 'giant' is no preset; valid: stories260K,"));
  absl::StatusOr<LoadedModel> m = loadModel({"", "nano", model::WeightFormat{DType::Q8_0}, 3});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->shortName, "nano Q8_0");
  EXPECT_THAT(m->description, HasSubstr("synthetic nano (seed 3): dim 32"));
  EXPECT_GT(m->bytes, 0u);
  const model::WeightFormat mix{DType::Q4_K, model::WeightMix::Q4_K_M};
  m = loadModel({"", "nano", mix, 3});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->shortName, "nano q4_k_m");
}

struct Opts {
  ModelSource model;
  BackendFlags backend;
  uint32_t n = 0;
};

absl::Status parse(std::vector<const char *> args, Opts &o) {
  std::vector<Flag<Opts>> flags;
  appendFlags(flags, modelFlags(), &Opts::model);
  appendFlags(flags, backendFlags(), &Opts::backend);
  flags.push_back(
      {"-n", "N", "count", [](Opts &o, const std::string &v) { return parseInt("-n", v, &o.n); }});
  args.insert(args.begin(), "tool");
  return parseFlags(int(args.size()), args.data(), flags, o);
}

TEST(ToolFlagsTest, SharedFlagsParseIntoTheirPart) {
  Opts o;
  ASSERT_TRUE(parse({"--synthetic=micro", "--dtype", "q4_0", "--backend", "cpu", "--fusion", "off",
                     "-n", "12"},
                    o)
                  .ok());
  EXPECT_EQ(o.model.synthetic, "micro");
  ASSERT_TRUE(o.model.dtype.has_value());
  EXPECT_EQ(o.model.dtype->dtype, DType::Q4_0);
  EXPECT_EQ(o.model.dtype->mix, model::WeightMix::None);
  Opts mixed;
  ASSERT_TRUE(parse({"--synthetic=micro", "--dtype", "Q5_K_M"}, mixed).ok());
  EXPECT_EQ(mixed.model.dtype->dtype, DType::Q5_K);
  EXPECT_EQ(mixed.model.dtype->mix, model::WeightMix::Q5_K_M);
  EXPECT_FALSE(parse({"--synthetic=micro", "--dtype", "q4_k_s"}, mixed).ok());
  EXPECT_EQ(o.backend.kind, "cpu");
  EXPECT_FALSE(o.backend.fusion);
  EXPECT_EQ(o.n, 12u);
  absl::StatusOr<BackendOptions> b = backendOptions(o.backend);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->kind, "cpu");
  EXPECT_FALSE(b->fusion);
}

TEST(ToolFlagsTest, BadValuesNameTheFlag) {
  Opts o;
  EXPECT_EQ(parse({"-n", "-3"}, o).message(), "-n: '-3' is not a non-negative integer in range");
  EXPECT_EQ(parse({"-n", "99999999999"}, o).message(),
            "-n: '99999999999' is not a non-negative integer in range");
  EXPECT_EQ(parse({"-n"}, o).message(), "-n needs an argument N");
  EXPECT_THAT(parse({"--backend", "gpu"}, o).message(),
              HasSubstr("--backend: 'gpu' is no backend kind; valid: auto,"));
  EXPECT_THAT(parse({"--dtype", "q9"}, o).message(), HasSubstr("--dtype: 'q9' is not a dtype"));
  EXPECT_EQ(parse({"--fusion=maybe"}, o).message(), "--fusion: 'maybe' is neither on nor off");
  EXPECT_EQ(parse({"--frob"}, o).message(), "unknown argument '--frob' (see --help)");
}

TEST(ToolFlagsTest, HelpWrapsAtOneHundredColumns) {
  std::string words;
  for (int i = 0; i < 60; ++i)
    words += "word ";
  const std::string help = flagLine("--long", nullptr, words);
  EXPECT_EQ(help.rfind("  --long", 0), 0u) << help;
  EXPECT_GT(std::count(help.begin(), help.end(), '\n'), 2);
  for (absl::string_view line : absl::StrSplit(help, '\n'))
    EXPECT_LE(line.size(), 101u) << line; // a trailing space may follow the 100th column
}

} // namespace
} // namespace sinter::tools
