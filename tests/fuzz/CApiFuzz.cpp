// CApiFuzz.cpp - libFuzzer target: arbitrary call sequences and arguments through the C ABI.
//
// Built with clang -fsanitize=fuzzer,address,undefined over the C ABI, the reference backend,
// the lazy recorder and the plan interpreter (tests/fuzz/CMakeLists.txt; FuzzFactory.cpp stands
// in for the MLIR-backed factory). Each input is a program of up to 64 calls. In differential
// mode (first byte even) every call goes to a reference and a lazy backend with the same
// arguments: both must return the same status code, and every copy_from_device the same bytes
// (the plan interpreter runs the reference kernels). In fault mode (first byte odd) the input
// also arms runtime fault sites on the lazy backend: then only "no crash, only error codes, and
// the backend still works afterwards" is checked. Both modes check the ABI's own promises:
// codes in range, messages NUL-terminated within the caller's capacity, out-handles zeroed on
// failure, no handle id ever handed out twice.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "runtime/FaultInjection.h"
#include "sinter/sinter.h"

namespace {

// Large enough that the program's allocations (at most 64 of kMaxBuffer bytes) never reach it:
// the lazy backend holds a freed buffer's bytes until pending work ran, so under a binding limit
// the two sides could legitimately differ. Allocations over the limit are tried separately.
constexpr uint64_t kMemoryLimit = 4 << 20;
constexpr uint64_t kMaxBuffer = 16 << 10;
constexpr int kMaxCalls = 64;

[[noreturn]] void fail(const char *what) {
  std::fprintf(stderr, "CApiFuzz invariant broken: %s\n", what);
  std::abort();
}

void checkStatus(sinter_status s) {
  if (s < SINTER_OK || s > SINTER_UNAUTHENTICATED)
    fail("status code out of range");
  if (!sinter_status_name(s) || !sinter_last_error())
    fail("null status name or message");
}

std::set<uint64_t> &everyHandle() {
  static std::set<uint64_t> handles;
  return handles;
}

// One backend under test and the handles it gave out (index i names the i-th allocation).
struct Side {
  sinter_backend *backend = nullptr;
  std::vector<sinter_buffer> handles;
};

uint32_t smallInt(FuzzedDataProvider &in) {
  static constexpr uint32_t kValues[] = {0, 1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 64, 255, 256};
  uint8_t pick = in.ConsumeIntegral<uint8_t>();
  if (pick < 224)
    return kValues[pick % 16];
  return in.ConsumeIntegral<uint32_t>();
}

float anyFloat(FuzzedDataProvider &in) {
  static constexpr float kValues[] = {1e-5f, 1e-6f, 0.0f, 1.0f, 10000.0f, 500000.0f, -1.0f, 1e30f};
  uint8_t pick = in.ConsumeIntegral<uint8_t>();
  if (pick < 240)
    return kValues[pick % 8];
  uint32_t bits = in.ConsumeIntegral<uint32_t>();
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f; // NaN and infinities included
}

// A buffer argument: the i-th handle of this side, or an id no backend has (0, huge).
struct BufferPick {
  int index = -1;
  sinter_buffer raw = 0;
};

BufferPick pickBuffer(FuzzedDataProvider &in) {
  uint8_t pick = in.ConsumeIntegral<uint8_t>();
  if (pick < 240)
    return {pick % 16, 0};
  return {-1, pick % 2 ? 0 : (uint64_t(1) << 50) + pick};
}

sinter_buffer resolve(const Side &side, BufferPick p) {
  if (p.index < 0)
    return p.raw;
  if (side.handles.empty())
    return 0;
  return side.handles[p.index % side.handles.size()];
}

uint32_t pickDType(FuzzedDataProvider &in) {
  static constexpr uint32_t kIds[] = {0, 1, 2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 24, 30};
  uint8_t pick = in.ConsumeIntegral<uint8_t>();
  if (pick < 240)
    return kIds[pick % 16];
  return in.ConsumeIntegral<uint32_t>();
}

// Decodes and runs one call on every side; returns each side's status (and read bytes).
struct Outcome {
  int op = 0;
  sinter_status status = SINTER_OK;
  std::vector<uint8_t> bytes;
};

void runCall(FuzzedDataProvider &in, std::vector<Side> &sides, std::vector<Outcome> &out) {
  uint8_t op = in.ConsumeIntegral<uint8_t>() % 20;
  BufferPick b0 = pickBuffer(in), b1 = pickBuffer(in), b2 = pickBuffer(in);
  uint32_t i0 = smallInt(in), i1 = smallInt(in), i2 = smallInt(in), i3 = smallInt(in),
           i4 = smallInt(in);
  float f = anyFloat(in);
  uint64_t size64 = in.ConsumeBool() ? smallInt(in) * uint64_t(smallInt(in) % 64 + 1)
                                     : in.ConsumeIntegral<uint64_t>();
  size_t length = in.ConsumeIntegralInRange<size_t>(0, 2048);
  std::vector<uint8_t> data = in.ConsumeBytes<uint8_t>(length);
  data.resize(length); // short input: zero-filled, the same for every side
  bool nullPointer = in.ConsumeIntegral<uint8_t>() == 0;
  uint32_t dtype = pickDType(in);
  out.assign(sides.size(), Outcome{});
  for (size_t s = 0; s < sides.size(); ++s) {
    Side &side = sides[s];
    sinter_backend *b = side.backend;
    sinter_buffer a = resolve(side, b0), c = resolve(side, b1), d = resolve(side, b2);
    sinter_status st = SINTER_OK;
    switch (op) {
    case 0: {
      sinter_buffer h = 12345;
      uint64_t bytes = i4 % 8 ? size64 % (kMaxBuffer + 1) : size64 | (kMemoryLimit << 1);
      st = sinter_allocate(b, bytes, nullPointer ? nullptr : &h);
      if (st == SINTER_OK) {
        if (h == 0 || !everyHandle().insert(h).second)
          fail("allocate returned 0 or a handle id seen before");
        side.handles.push_back(h);
      } else if (!nullPointer && h != 0) {
        fail("a failed allocate left a handle in *out");
      }
      break;
    }
    case 1:
      st = sinter_free(b, a);
      break;
    case 2:
      st = sinter_matmul(b, a, c, d, i0, i1, i2);
      break;
    case 3:
      st = sinter_softmax(b, a, c, i0);
      break;
    case 4:
      st = sinter_rms_norm(b, a, c, d, i0, f);
      break;
    case 5:
      st = sinter_rope(b, a, c, i0, i1, f, i2, i3);
      break;
    case 6:
      st = sinter_silu(b, a, c, i0);
      break;
    case 7:
      st = sinter_element_mul(b, a, c, d, i0);
      break;
    case 8:
      st = sinter_add(b, a, c, d, i0);
      break;
    case 9:
      st = sinter_copy_to_device(b, nullPointer ? nullptr : data.data(), data.size(), a);
      break;
    case 10:
      out[s].bytes.assign(data.size(), 0xAB);
      st = sinter_copy_from_device(b, a, nullPointer ? nullptr : out[s].bytes.data(),
                                   out[s].bytes.size());
      if (st != SINTER_OK)
        out[s].bytes.clear();
      break;
    case 11:
      st = sinter_copy_buffer(b, a, c, size64);
      break;
    case 12:
      st = sinter_copy_buffer_offset(b, a, c, i0, i1, size64 % 4096);
      break;
    case 13:
      st = sinter_synchronize(b);
      break;
    case 14:
      st = sinter_attn_score(b, a, c, d, i0, i1, i2, i3, i4);
      break;
    case 15:
      st = sinter_attn_value(b, a, c, d, i0, i1, i2, i3, i4);
      break;
    case 16:
      st = sinter_quantized_matmul(b, a, c, d, i0, i1, dtype);
      break;
    case 17: {
      char name[16];
      size_t len = 0;
      size_t cap = i0 % 17;
      std::memset(name, 0x5A, sizeof name);
      st = sinter_name(b, nullPointer ? nullptr : name, cap, &len);
      if (st == SINTER_OK && cap > 0 && !std::memchr(name, 0, cap))
        fail("sinter_name wrote no NUL within cap");
      break;
    }
    case 18: {
      char name[8];
      uint32_t kind = 0;
      uint64_t memory = 0;
      uint32_t units = 0;
      st = sinter_device_info(b, name, i0 % 9, nullptr, &kind, &memory, &units);
      break;
    }
    default: {
      char message[24];
      size_t cap = i0 % 25;
      std::memset(message, 0x5A, sizeof message);
      size_t len = sinter_backend_last_error(b, cap ? message : nullptr, cap);
      if (cap > 0 && !std::memchr(message, 0, cap))
        fail("sinter_backend_last_error wrote no NUL within cap");
      (void)len;
      break;
    }
    }
    checkStatus(st);
    out[s].status = st;
    out[s].op = op;
  }
}

// The backend accepts new work after whatever happened: a fresh buffer round-trips.
void checkStillWorks(sinter_backend *b) {
  sinter_buffer h = 0;
  // A deferred failure is reported once; after that the backend must be clean.
  (void)sinter_synchronize(b);
  if (sinter_synchronize(b) != SINTER_OK)
    fail("a deferred failure was reported twice");
  if (sinter_allocate(b, 16, &h) != SINTER_OK)
    fail("allocate of 16 bytes failed after the program");
  sinter_buffer h2 = 0;
  if (sinter_allocate(b, 16, &h2) != SINTER_OK)
    fail("allocate of 16 bytes failed after the program");
  uint8_t bytes[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, back[16] = {};
  if (sinter_copy_to_device(b, bytes, 16, h) != SINTER_OK ||
      sinter_copy_buffer(b, h, h2, 16) != SINTER_OK ||
      sinter_copy_from_device(b, h2, back, 16) != SINTER_OK || std::memcmp(bytes, back, 16) != 0)
    fail("the backend no longer works after the program");
  if (sinter_free(b, h2) != SINTER_OK)
    fail("free of a fresh buffer failed");
  if (sinter_free(b, h) != SINTER_OK)
    fail("free of a fresh buffer failed");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using sinter::runtime::fault::ScopedFault;
  using sinter::runtime::fault::Site;
  FuzzedDataProvider in(data, size);
  bool faultMode = in.ConsumeIntegral<uint8_t>() & 1;
  std::vector<Side> sides(faultMode ? 1 : 2);
  const char *kinds[] = {"lazy", "reference"};
  for (size_t s = 0; s < sides.size(); ++s) {
    sinter_status st =
        sinter_backend_create_ex(kinds[s], 0, nullptr, kMemoryLimit, &sides[s].backend);
    if (st != SINTER_OK || !sides[s].backend)
      fail("creating a backend failed");
  }
  std::vector<std::unique_ptr<ScopedFault>> faults;
  if (faultMode) {
    // Arm up to three distinct sites, each failing a few hits after some skipped ones.
    bool taken[sinter::runtime::fault::kNumSites] = {};
    for (int i = 0, n = in.ConsumeIntegralInRange<int>(0, 3); i < n; ++i) {
      int site = in.ConsumeIntegralInRange<int>(0, sinter::runtime::fault::kNumSites - 1);
      int64_t skip = in.ConsumeIntegralInRange<int>(0, 8);
      int64_t count = in.ConsumeIntegralInRange<int>(-1, 3);
      if (taken[site])
        continue;
      taken[site] = true;
      faults.push_back(std::make_unique<ScopedFault>(Site(site), skip, count));
    }
  }
  std::vector<Outcome> outcomes;
  for (int call = 0; call < kMaxCalls && in.remaining_bytes() > 0; ++call) {
    runCall(in, sides, outcomes);
    if (!faultMode) {
      if (outcomes[0].status != outcomes[1].status) {
        char lazyError[256] = {}, refError[256] = {};
        sinter_backend_last_error(sides[0].backend, lazyError, sizeof lazyError);
        sinter_backend_last_error(sides[1].backend, refError, sizeof refError);
        std::fprintf(stderr, "call %d: op %d: lazy %s (%s), reference %s (%s)\n", call,
                     outcomes[0].op, sinter_status_name(outcomes[0].status), lazyError,
                     sinter_status_name(outcomes[1].status), refError);
        fail("lazy and reference returned different codes for the same call");
      }
      if (outcomes[0].bytes != outcomes[1].bytes)
        fail("lazy and reference read different bytes");
    }
  }
  faults.clear();
  for (Side &side : sides) {
    checkStillWorks(side.backend);
    sinter_backend_destroy(side.backend);
  }
  // NULL backends are refused, never dereferenced.
  checkStatus(sinter_synchronize(nullptr));
  if (sinter_synchronize(nullptr) != SINTER_INVALID_ARGUMENT)
    fail("a NULL backend was not INVALID_ARGUMENT");
  return 0;
}
