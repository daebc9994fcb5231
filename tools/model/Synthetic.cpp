// Synthetic.cpp - the random model generator.
//
// Work is split into chunks of rows over every tensor; a worker draws each row's floats from a
// stream seeded by (seed, tensor number, row) and quantizes the row straight into the tensor, so no
// f32 copy of a large model is ever held and any thread count gives the same bytes.
#include "tools/model/Synthetic.h"

#include <atomic>
#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "sinter/Status.h"
#include "support/Quant.h"

namespace sinter::model {
namespace {

uint64_t splitmix64(uint64_t &x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman and Vigna), seeded through splitmix64.
class Xoshiro {
public:
  explicit Xoshiro(uint64_t seed) {
    for (uint64_t &w : s_)
      w = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  /// Two values uniform in [-1, 1) with 24-bit resolution, from one draw (halves the cost of
  /// filling a billion weights).
  void symmetricPair(float *a, float *b) {
    const uint64_t r = next();
    *a = float(int32_t(uint32_t(r >> 40)) - (1 << 23)) * 0x1p-23f;
    *b = float(int32_t(uint32_t(r >> 8) & 0xffffff) - (1 << 23)) * 0x1p-23f;
  }

private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// One tensor to fill: values are offset + scale * U(-1, 1).
struct Job {
  WeightTensor *tensor;
  uint64_t id;
  float offset;
  float scale;
};

void fillRows(const Job &job, uint64_t seed, uint64_t begin, uint64_t end, std::vector<float> &row,
              absl::Status &status) {
  WeightTensor &t = *job.tensor;
  row.resize(t.cols);
  const uint64_t rb = t.rowBytes();
  for (uint64_t r = begin; r < end; ++r) {
    Xoshiro rng(seed ^ (job.id * 0x9e3779b97f4a7c15ull) ^ (r * 0xd1b54a32d192ed03ull));
    float a, b;
    size_t i = 0;
    for (; i + 1 < row.size(); i += 2) {
      rng.symmetricPair(&a, &b);
      row[i] = job.offset + job.scale * a;
      row[i + 1] = job.offset + job.scale * b;
    }
    if (i < row.size()) {
      rng.symmetricPair(&a, &b);
      row[i] = job.offset + job.scale * a;
    }
    absl::Status s = quantizeRow(t.dtype, row.data(), t.data.data() + r * rb, t.cols);
    if (!s.ok())
      status = s;
  }
}

} // namespace

absl::StatusOr<ModelWeights> generateSynthetic(const ModelConfig &config, bool sharedClassifier,
                                               const SyntheticOptions &options,
                                               std::vector<std::string> *keptF32) {
  SINTER_RETURN_IF_ERROR(validateConfig(config));
  if (!canQuantize(options.dtype))
    return absl::UnimplementedError(
        absl::StrCat("synthetic: cannot write ", dtypeName(options.dtype), " weights"));
  const WeightFormat format{options.dtype, options.mix};
  ModelWeights w;
  w.config = config;
  w.layers.resize(config.nLayers);
  const uint64_t dim = config.dim, kv = config.kvDim(), hidden = config.hiddenDim;
  auto shape = [&](WeightTensor &t, uint64_t rows, uint64_t cols) {
    t.rows = rows;
    t.cols = cols;
    t.dtype = DType::F32; // the format is assigned by name below
  };
  shape(w.tokenEmbedding, config.vocabSize, dim);
  for (LayerWeights &L : w.layers) {
    shape(L.attnNorm, 1, dim);
    shape(L.wq, dim, dim);
    shape(L.wk, kv, dim);
    shape(L.wv, kv, dim);
    shape(L.wo, dim, dim);
    shape(L.ffnNorm, 1, dim);
    shape(L.gate, hidden, dim);
    shape(L.up, hidden, dim);
    shape(L.down, dim, hidden);
  }
  shape(w.outputNorm, 1, dim);
  if (!sharedClassifier)
    shape(w.output, config.vocabSize, dim);

  // One job per tensor, numbered in file order; uniform U(-a, a) has std a / sqrt(3).
  std::vector<Job> jobs;
  uint64_t id = 0;
  for (const NamedTensor &nt : namedTensors(w)) {
    // namedTensors hands out const pointers; the tensors are `w`'s own, which is not const.
    WeightTensor *t = const_cast<WeightTensor *>(nt.tensor);
    const bool norm = nt.name.find("norm") != std::string::npos;
    t->dtype = tensorFormat(format, nt.name, config.nLayers, t->cols, sharedClassifier);
    t->data.resize(t->rows * t->rowBytes());
    if (!norm && t->dtype == DType::F32 && options.dtype != DType::F32 && keptF32)
      keptF32->push_back(nt.name);
    const float scale = norm ? 0.1f : std::sqrt(3.0f / float(t->cols));
    jobs.push_back({t, id++, norm ? 1.0f : 0.0f, scale});
  }

  // Chunks of about 64K weights, claimed by workers through one counter.
  struct Chunk {
    uint32_t job;
    uint64_t begin, end;
  };
  std::vector<Chunk> chunks;
  for (uint32_t j = 0; j < jobs.size(); ++j) {
    const uint64_t rows = jobs[j].tensor->rows;
    const uint64_t step = std::max<uint64_t>(1, (uint64_t(1) << 16) / jobs[j].tensor->cols);
    for (uint64_t r = 0; r < rows; r += step)
      chunks.push_back({j, r, std::min(rows, r + step)});
  }
  if (options.zeroWeights)
    chunks.clear();
  unsigned threads = options.threads ? options.threads : std::thread::hardware_concurrency();
  threads = std::max(1u, std::min<unsigned>(threads, unsigned(chunks.size())));
  std::atomic<size_t> next{0};
  absl::Mutex mu;
  absl::Status failure;
  auto worker = [&] {
    std::vector<float> row;
    absl::Status status;
    for (size_t c; (c = next.fetch_add(1)) < chunks.size();)
      fillRows(jobs[chunks[c].job], options.seed, chunks[c].begin, chunks[c].end, row, status);
    if (!status.ok()) {
      absl::MutexLock lock(&mu);
      failure = status;
    }
  };
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < threads; ++i)
    pool.emplace_back(worker);
  worker();
  for (std::thread &t : pool)
    t.join();
  SINTER_RETURN_IF_ERROR(failure);

  if (options.withVocab) {
    w.vocab.reserve(config.vocabSize);
    for (uint32_t i = 0; i < config.vocabSize; ++i)
      w.vocab.push_back(i == 0   ? "<unk>"
                        : i == 1 ? "<s>"
                        : i == 2 ? "</s>"
                                 : absl::StrCat("\u2581w", i));
  }
  return w;
}

absl::StatusOr<ModelWeights> generatePreset(const std::string &preset,
                                            const SyntheticOptions &options,
                                            std::vector<std::string> *keptF32) {
  SINTER_ASSIGN_OR_RETURN(Preset p, findPreset(preset));
  return generateSynthetic(p.config, p.sharedClassifier, options, keptF32);
}

} // namespace sinter::model
