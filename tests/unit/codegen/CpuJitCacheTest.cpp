// CpuJitCacheTest.cpp - tests SINTER_CACHE_DIR (codegen/llvm/CpuJit.cpp): a second compiler with
// the same directory loads every module from disk and computes the same bytes; corrupt entries
// and an unwritable directory give warnings and normal compilations, never other results.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "backends/CpuBackend.h"
#include "codegen/CpuCompiler.h"
#include "tools/model/Decoder.h"
#include "tools/model/Synthetic.h"

namespace sinter {
namespace {

namespace fs = std::filesystem;

class ScopedCacheDir {
public:
  explicit ScopedCacheDir(const std::string &dir) {
    const char *old = std::getenv("SINTER_CACHE_DIR");
    had_ = old != nullptr;
    old_ = old ? old : "";
    setenv("SINTER_CACHE_DIR", dir.c_str(), 1);
  }
  ~ScopedCacheDir() {
    if (had_)
      setenv("SINTER_CACHE_DIR", old_.c_str(), 1);
    else
      unsetenv("SINTER_CACHE_DIR");
  }

private:
  bool had_;
  std::string old_;
};

std::string freshDir(const char *name) {
  fs::path dir = fs::temp_directory_path() /
                 (std::string("sinter-cache-test-") + name + "-" + std::to_string(::getpid()));
  std::error_code error;
  fs::remove_all(dir, error);
  return dir.string();
}

struct CacheRun {
  std::vector<float> logits;
  codegen::CpuJitTimes jit;
};

// Decodes three steps of a Q4_0 micro model on a cpu backend with a compiler of its own (built
// while SINTER_CACHE_DIR holds `dir`).
CacheRun decodeWithCache(const std::string &dir, bool fusion = true) {
  ScopedCacheDir env(dir);
  auto created = codegen::CpuCompiler::create();
  EXPECT_TRUE(created.ok()) << created.status();
  if (!created.ok())
    return {};
  std::shared_ptr<codegen::CpuCompiler> compiler(std::move(*created));
  BackendOptions options;
  options.kind = "cpu";
  options.fusion = fusion;
  std::unique_ptr<ComputeBackend> backend = *createCpuBackend(options, compiler);
  model::SyntheticOptions so;
  so.dtype = DType::Q4_0;
  so.withVocab = false;
  model::ModelWeights weights = *model::generatePreset("micro", so);
  auto decoder = model::Decoder::create(*backend, weights);
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  CacheRun run;
  for (uint32_t pos = 0; decoder.ok() && pos < 3; ++pos) {
    absl::StatusOr<std::vector<float>> logits = (*decoder)->step(pos + 1, pos);
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (logits.ok())
      run.logits.insert(run.logits.end(), logits->begin(), logits->end());
  }
  run.jit = compiler->stats().jit;
  return run;
}

std::vector<fs::path> entries(const std::string &dir) {
  std::vector<fs::path> out;
  std::error_code error;
  for (const fs::directory_entry &e : fs::directory_iterator(dir, error))
    if (e.path().extension() == ".o")
      out.push_back(e.path());
  return out;
}

TEST(CpuJitCacheTest, ASecondCompilerLoadsEveryModuleFromDisk) {
  const std::string dir = freshDir("reuse");
  CacheRun cold = decodeWithCache(dir);
  ASSERT_FALSE(cold.logits.empty());
  EXPECT_GT(cold.jit.modules, 0u);
  EXPECT_EQ(cold.jit.diskHits, 0u);
  EXPECT_EQ(cold.jit.diskWrites, cold.jit.modules) << "every module written";
  EXPECT_EQ(cold.jit.diskErrors, 0u);
  EXPECT_EQ(entries(dir).size(), cold.jit.modules);

  CacheRun warm = decodeWithCache(dir);
  EXPECT_EQ(warm.jit.modules, cold.jit.modules);
  EXPECT_EQ(warm.jit.diskHits, warm.jit.modules) << "every module loaded";
  EXPECT_EQ(warm.jit.diskWrites, 0u);
  EXPECT_EQ(warm.jit.optimize, 0.0) << "no O3 for loaded modules";
  ASSERT_EQ(warm.logits.size(), cold.logits.size());
  EXPECT_EQ(std::memcmp(warm.logits.data(), cold.logits.data(), warm.logits.size() * 4), 0);
  std::printf("cold: O3 %.1f ms, codegen %.1f ms; warm: codegen (load) %.1f ms\n",
              cold.jit.optimize * 1e3, cold.jit.codegen * 1e3, warm.jit.codegen * 1e3);
  std::error_code error;
  fs::remove_all(dir, error);
}

TEST(CpuJitCacheTest, CorruptEntriesAreCompiledAgain) {
  const std::string dir = freshDir("corrupt");
  CacheRun cold = decodeWithCache(dir, /*fusion=*/false);
  std::vector<fs::path> files = entries(dir);
  ASSERT_FALSE(files.empty());
  for (size_t i = 0; i < files.size(); ++i) {
    if (i % 2 == 0) {
      // Flip a byte in the object code: the digest no longer matches.
      std::fstream f(files[i], std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(-1, std::ios::end);
      char c;
      f.get(c);
      f.seekp(-1, std::ios::end);
      f.put(char(c ^ 0x5a));
    } else {
      std::ofstream(files[i], std::ios::trunc) << "not an object";
    }
  }
  CacheRun again = decodeWithCache(dir, /*fusion=*/false);
  EXPECT_EQ(again.jit.diskHits, 0u);
  EXPECT_EQ(again.jit.diskErrors, files.size()) << "one warning per corrupt entry";
  EXPECT_EQ(again.jit.diskWrites, again.jit.modules) << "the entries are replaced";
  ASSERT_EQ(again.logits.size(), cold.logits.size());
  EXPECT_EQ(std::memcmp(again.logits.data(), cold.logits.data(), again.logits.size() * 4), 0);
  CacheRun third = decodeWithCache(dir, /*fusion=*/false);
  EXPECT_EQ(third.jit.diskHits, third.jit.modules) << "the rewritten entries load";
  std::error_code error;
  fs::remove_all(dir, error);
}

TEST(CpuJitCacheTest, AnUnwritableDirectoryOnlyWarns) {
  // A path below a regular file can be neither created nor written.
  const std::string file = freshDir("file");
  std::ofstream(file) << "a file, not a directory";
  CacheRun run = decodeWithCache(file + "/cache");
  CacheRun plain = decodeWithCache("");
  EXPECT_EQ(plain.jit.diskWrites + plain.jit.diskErrors + plain.jit.diskHits, 0u);
  EXPECT_EQ(run.jit.diskHits, 0u);
  EXPECT_EQ(run.jit.diskWrites, 0u);
  EXPECT_EQ(run.jit.diskErrors, run.jit.modules) << "each failed write counted";
  ASSERT_EQ(run.logits.size(), plain.logits.size());
  EXPECT_EQ(std::memcmp(run.logits.data(), plain.logits.data(), run.logits.size() * 4), 0);
  std::error_code error;
  fs::remove(file, error);
}

} // namespace
} // namespace sinter
