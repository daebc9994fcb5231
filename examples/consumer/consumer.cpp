// consumer.cpp - a C++ program on the installed C++ API: createBackend, one matmul, a check.
//
// Usage: consumer_cpp [KIND] (default: createBackendFromEnvironment, i.e. SINTER_BACKEND, else
// "auto": vulkan on a GPU, else cpu). Lists the devices first. Exits 0 when the product and the
// error path are right, 1 otherwise.
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "sinter/ComputeBackend.h"
#include "sinter/Devices.h"
#include "sinter/Factory.h"

namespace {

int fail(const char *what, const absl::Status &status) {
  std::fprintf(stderr, "consumer_cpp: %s: %s\n", what, status.ToString().c_str());
  return 1;
}

absl::Span<const uint8_t> bytesOf(const std::vector<float> &v) {
  return {reinterpret_cast<const uint8_t *>(v.data()), v.size() * sizeof(float)};
}

} // namespace

int main(int argc, char **argv) {
  absl::StatusOr<std::vector<sinter::Device>> devices = sinter::listDevices();
  if (!devices.ok())
    return fail("listDevices", devices.status());
  for (const sinter::Device &d : *devices)
    std::printf("consumer_cpp: device %s\n", sinter::describeDevice(d).c_str());
  sinter::BackendOptions options;
  if (argc > 1)
    options.kind = argv[1];
  absl::StatusOr<std::unique_ptr<sinter::ComputeBackend>> made =
      argc > 1 ? sinter::createBackend(options) : sinter::createBackendFromEnvironment();
  if (!made.ok())
    return fail("createBackend", made.status());
  sinter::ComputeBackend &backend = **made;

  // [1 2; 3 4] x [5 6; 7 8] = [19 22; 43 50].
  const std::vector<float> a = {1, 2, 3, 4}, b = {5, 6, 7, 8}, expected = {19, 22, 43, 50};
  std::vector<float> out(4);
  absl::StatusOr<sinter::BufferHandle> ha = backend.allocate(16), hb = backend.allocate(16),
                                       hout = backend.allocate(16);
  if (!ha.ok() || !hb.ok() || !hout.ok())
    return fail("allocate", !ha.ok() ? ha.status() : !hb.ok() ? hb.status() : hout.status());
  if (absl::Status s = backend.copyToDevice(bytesOf(a), *ha); !s.ok())
    return fail("copyToDevice", s);
  if (absl::Status s = backend.copyToDevice(bytesOf(b), *hb); !s.ok())
    return fail("copyToDevice", s);
  if (absl::Status s = backend.matmul(*ha, *hb, *hout, 2, 2, 2); !s.ok())
    return fail("matmul", s);
  if (absl::Status s = backend.copyFromDevice(
          *hout, absl::MakeSpan(reinterpret_cast<uint8_t *>(out.data()), 16));
      !s.ok())
    return fail("copyFromDevice", s);
  if (out != expected) {
    std::fprintf(stderr, "consumer_cpp: matmul gave %g %g %g %g\n", out[0], out[1], out[2], out[3]);
    return 1;
  }
  // The error path: an unknown handle is NotFound, with a message.
  absl::Status bad = backend.free(sinter::BufferHandle{~uint64_t(0)});
  if (bad.code() != absl::StatusCode::kNotFound || bad.message().empty())
    return fail("free of an unknown handle should be NotFound", bad);
  std::printf("consumer_cpp: backend %s (%s): matmul gave 19 22 43 50; unknown free: %s\n",
              backend.name().c_str(), sinter::backendKindName(backend.deviceInfo().kind),
              bad.ToString().c_str());
  return 0;
}
