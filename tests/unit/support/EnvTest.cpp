// EnvTest.cpp - the numeric SINTER_* variables (support/Env.h): a set variable is a decimal
// integer in its range or an error naming it; unset and empty keep the default.
#include "support/Env.h"

#include <optional>
#include <string>
#include <utility>

#include "tests/support/ScopedEnv.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

using test::ScopedEnv;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr EnvInteger kVar{"TEST_SINTER_ENV_VALUE", 1, 100};

TEST(EnvTest, UnsetAndEmptyAreNoValue) {
  ScopedEnv unset(kVar.name, nullptr);
  EXPECT_EQ(readEnvInteger(kVar).value(), std::nullopt);
  EXPECT_EQ(envIntegerOr(kVar, 7), 7u);
  ScopedEnv empty(kVar.name, "");
  EXPECT_EQ(readEnvInteger(kVar).value(), std::nullopt);
}

TEST(EnvTest, IntegersInRangeAreTaken) {
  for (const auto &[text, value] : {std::pair{"1", 1u}, {"100", 100u}, {"042", 42u}, {" 9 ", 9u}}) {
    ScopedEnv env(kVar.name, text);
    absl::StatusOr<std::optional<uint64_t>> got = readEnvInteger(kVar);
    ASSERT_TRUE(got.ok()) << text << ": " << got.status();
    EXPECT_EQ(*got, value) << text;
    EXPECT_EQ(envIntegerOr(kVar, 7), value) << text;
  }
}

TEST(EnvTest, AnythingElseIsAnErrorNamingTheVariable) {
  for (const char *text :
       {"0", "101", "-1", "+5", "abc", "5x", "1.5", "1e2", "99999999999999999999"}) {
    ScopedEnv env(kVar.name, text);
    absl::StatusOr<std::optional<uint64_t>> got = readEnvInteger(kVar);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(got.status().message()),
                AllOf(HasSubstr("TEST_SINTER_ENV_VALUE"), HasSubstr("'" + std::string(text) + "'"),
                      HasSubstr("[1, 100]")))
        << text;
    EXPECT_EQ(envIntegerOr(kVar, 7), 7u) << "a reader that cannot fail keeps its default";
  }
}

TEST(EnvTest, CheckLibraryEnvironmentNamesTheFirstBadVariable) {
  ScopedEnv threads("SINTER_THREADS", nullptr), trace("SINTER_MAX_TRACE", nullptr);
  EXPECT_TRUE(checkLibraryEnvironment().ok());
  ScopedEnv bad("SINTER_OVERLAP_GROWTH", "fast");
  absl::Status s = checkLibraryEnvironment();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("SINTER_OVERLAP_GROWTH"));
}

} // namespace
} // namespace sinter
