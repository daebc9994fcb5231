// VulkanRuntimeTest.cpp - the runtime's parts one at a time: the range allocator (no device),
// device memory sub-allocation, the staging ring, descriptor reuse over many dispatches, and the
// pipeline cache in memory and on disk. Validation on, zero messages.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <random>
#include <tuple>
#include <unistd.h>

#include "VulkanTestUtil.h"
#include "runtime/vulkan/DescriptorCache.h"
#include "runtime/vulkan/HazardTracker.h"
#include "runtime/vulkan/PipelineCache.h"
#include "runtime/vulkan/RangeAllocator.h"
#include "runtime/vulkan/StagingRing.h"
#include "runtime/vulkan/VulkanMemory.h"
#include "gtest/gtest.h"

namespace sinter::runtime::vulkan {
namespace {

using test::asBytes;
using test::asWritableBytes;
using test::bytesOf;

TEST(RangeAllocatorTest, AlignsAndCoalesces) {
  RangeAllocator r(1024);
  auto a = r.allocate(10, 16), b = r.allocate(100, 64), c = r.allocate(1, 256);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(*a, 0u);
  EXPECT_EQ(*b % 64, 0u);
  EXPECT_EQ(*c % 256, 0u);
  EXPECT_GE(*b, *a + 10);
  EXPECT_EQ(r.numAllocations(), 3u);
  EXPECT_FALSE(r.allocate(2000, 1));
  EXPECT_TRUE(r.free(*b));
  EXPECT_FALSE(r.free(*b)) << "a double free is reported";
  EXPECT_TRUE(r.free(*a));
  EXPECT_TRUE(r.free(*c));
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.usedBytes(), 0u);
  EXPECT_EQ(r.numFreeRanges(), 1u) << "every range merged back";
  EXPECT_EQ(r.largestFreeRange(), 1024u);
}

TEST(RangeAllocatorTest, RandomChurnNeverOverlapsAndEndsEmpty) {
  RangeAllocator r(1 << 20);
  std::mt19937 rng(7);
  std::map<uint64_t, uint64_t> live; // offset -> size
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      uint64_t size = 1 + rng() % 5000, align = uint64_t{1} << (rng() % 9);
      auto off = r.allocate(size, align);
      if (!off)
        continue;
      ASSERT_EQ(*off % align, 0u);
      auto next = live.lower_bound(*off);
      if (next != live.end())
        ASSERT_LE(*off + size, next->first) << "overlaps the next range";
      if (next != live.begin())
        ASSERT_LE(std::prev(next)->first + std::prev(next)->second, *off);
      live[*off] = size;
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      ASSERT_TRUE(r.free(it->first));
      live.erase(it);
    }
  }
  for (auto &[off, size] : live)
    ASSERT_TRUE(r.free(off));
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.numFreeRanges(), 1u);
}

StepAccesses step(std::initializer_list<std::tuple<uint32_t, bool, bool>> slots) {
  StepAccesses s;
  for (auto [slot, read, write] : slots)
    s.add(slot, read, write);
  return s;
}

TEST(HazardTrackerTest, BarriersExactlyOnRawWarAndWaw) {
  HazardTracker h(4);
  // y(2) = a(0) + b(1); z(3) = a + b: readers share inputs, outputs distinct: no barrier.
  StepAccesses add1 = step({{0, true, false}, {1, true, false}, {2, false, true}});
  StepAccesses add2 = step({{0, true, false}, {1, true, false}, {3, false, true}});
  EXPECT_FALSE(h.needsBarrier(add1));
  h.mark(add1);
  EXPECT_FALSE(h.needsBarrier(add2));
  h.mark(add2);
  EXPECT_TRUE(h.needsBarrier(step({{2, true, false}}))) << "read after write";
  EXPECT_TRUE(h.needsBarrier(step({{0, false, true}}))) << "write after read";
  EXPECT_TRUE(h.needsBarrier(step({{3, false, true}}))) << "write after write";
  EXPECT_FALSE(h.needsBarrier(step({{0, true, false}}))) << "read after read";
  // In place (a = a * b) is one step: it does not wait for itself.
  HazardTracker fresh(4);
  StepAccesses inPlace = step({{0, true, true}, {1, true, false}, {0, true, true}});
  EXPECT_FALSE(fresh.needsBarrier(inPlace));
  fresh.mark(inPlace);
  EXPECT_TRUE(fresh.needsBarrier(step({{0, true, false}})));
  fresh.clear();
  EXPECT_FALSE(fresh.needsBarrier(step({{0, true, true}}))) << "a barrier orders everything";
}

TEST(VulkanMemoryTest, SubAllocatesFromBlocksAndReleasesDedicatedOnes) {
  VulkanDeviceOptions options;
  options.memoryBlockBytes = 1 << 20;
  SINTER_VK_DEVICE_OR_SKIP(device, options);
  VulkanMemory &mem = device->memory();
  std::vector<BufferRef> refs;
  for (int i = 0; i < 10; ++i) {
    auto r = device->createBuffer(1000 + i);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->offset % mem.alignment(), 0u);
    refs.push_back(*r);
  }
  EXPECT_EQ(mem.stats().blocks, 1u) << "small buffers share one block";
  EXPECT_EQ(refs[0].buffer, refs[9].buffer);
  auto big = device->createBuffer(3 << 20);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(mem.stats().blocks, 2u);
  EXPECT_EQ(big->offset, 0u);
  uint64_t destroyed = mem.destroyedBlocks();
  device->freeBuffer(*big);
  EXPECT_EQ(mem.stats().blocks, 1u) << "a dedicated block goes with its buffer";
  EXPECT_EQ(mem.destroyedBlocks(), destroyed + 1);
  for (const BufferRef &r : refs)
    device->freeBuffer(r);
  EXPECT_EQ(mem.stats().liveAllocations, 0u);
  EXPECT_EQ(mem.stats().blocks, 1u) << "the last shared block is kept";
  EXPECT_FALSE(mem.free(refs[0])) << "a double free is reported";
  test::expectNoValidationMessages(*device);
}

TEST(VulkanMemoryTest, InjectedOutOfMemoryIsResourceExhausted) {
  VulkanDeviceOptions options;
  options.memoryBlockBytes = 1 << 16;
  SINTER_VK_DEVICE_OR_SKIP(device, options);
  device->memory().injectOutOfMemoryForTesting(1);
  auto r = device->createBuffer(1 << 20);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("VK_ERROR_OUT_OF_DEVICE_MEMORY"), std::string::npos);
  EXPECT_EQ(device->memory().stats().liveAllocations, 0u);
  EXPECT_TRUE(device->createBuffer(1 << 20).ok()) << "the next allocation works";
  test::expectNoValidationMessages(*device);
}

TEST(StagingRingTest, HandsOutAlignedSpansUntilReset) {
  VulkanDeviceOptions options;
  options.stagingBytes = 1024;
  SINTER_VK_DEVICE_OR_SKIP(device, options);
  StagingRing &ring = device->staging();
  ring.reset();
  auto a = ring.take(10), b = ring.take(100);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->offset, 0u);
  EXPECT_EQ(b->offset, 16u);
  EXPECT_EQ(b->data, a->data + 16);
  auto c = ring.take(1000);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(c.status().message(), "staging ring: 1000 bytes requested, 896 of 1024 left");
  ring.reset();
  EXPECT_TRUE(ring.take(1024).ok());
  test::expectNoValidationMessages(*device);
}

// Dispatches add_f32 over a few buffer triples again and again: the sets are made once.
TEST(DescriptorCacheTest, ReusesSetsAcrossManyDispatches) {
  SINTER_VK_DEVICE_OR_SKIP(device);
  KernelBinary k = test::loadKernel("add_f32", 3, 4);
  const uint32_t n = 64;
  std::vector<BufferRef> bufs;
  for (int i = 0; i < 4; ++i) {
    auto b = device->createBuffer(n * 4);
    ASSERT_TRUE(b.ok());
    std::vector<float> v(n, float(i + 1));
    ASSERT_TRUE(device->write(*b, asBytes(v)).ok());
    bufs.push_back(*b);
  }
  for (int iter = 0; iter < 200; ++iter) {
    BufferRef refs[] = {bufs[iter % 2], bufs[2], bufs[3]};
    ASSERT_TRUE(device->dispatchOnce(k, refs, bytesOf(n), {1, 1, 1}).ok());
  }
  DescriptorStats s = device->descriptors().stats();
  EXPECT_EQ(s.lookups, 200u);
  EXPECT_EQ(s.setsAllocated, 2u);
  EXPECT_EQ(s.hits, 198u);
  std::vector<float> y(n);
  ASSERT_TRUE(device->read(bufs[3], asWritableBytes(y)).ok());
  EXPECT_EQ(y[0], 2.0f + 3.0f);
  test::expectNoValidationMessages(*device);
}

// A bounded cache over a stream of distinct bindings: pools are reset, never exhausted.
TEST(DescriptorCacheTest, DistinctBindingsStayBounded) {
  SINTER_VK_DEVICE_OR_SKIP(device);
  KernelBinary k = test::loadKernel("add_f32", 3, 4);
  auto pipeline = device->pipelines().get(k);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  const Pipeline *p = pipeline->get();
  DescriptorCache cache(device->device(), /*setsPerPool=*/8, /*maxSets=*/20);
  auto big = device->createBuffer(1 << 16);
  ASSERT_TRUE(big.ok());
  for (uint64_t i = 0; i < 5000; ++i) {
    BufferRef slice = *big;
    slice.offset = (i % 1000) * 64;
    slice.size = 64;
    BufferRef refs[] = {slice, *big, *big};
    auto set = cache.get(*p, refs);
    ASSERT_TRUE(set.ok()) << set.status();
    cache.trim();
    ASSERT_LE(cache.stats().liveSets, 21u);
  }
  DescriptorStats s = cache.stats();
  EXPECT_LE(s.pools, 3u);
  EXPECT_GT(s.resets, 100u);
  test::expectNoValidationMessages(*device);
}

TEST(PipelineCacheTest, CompilesOncePerKernelAndSavesToDisk) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("sinter-vk-cache-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  VulkanDeviceOptions options;
  options.pipelineCacheDir = dir.string();
  std::string path;
  {
    SINTER_VK_DEVICE_OR_SKIP(device, options);
    KernelBinary k = test::loadKernel("add_f32", 3, 4);
    auto p1 = device->pipelines().get(k), p2 = device->pipelines().get(k);
    ASSERT_TRUE(p1.ok() && p2.ok());
    EXPECT_EQ(*p1, *p2);
    EXPECT_EQ(device->pipelines().stats().compiled, 1u);
    KernelBinary other = k;
    other.pushConstantBytes = 8;
    auto p3 = device->pipelines().get(other);
    ASSERT_TRUE(p3.ok());
    EXPECT_NE(*p3, *p1) << "the interface is part of the key";
    path = device->pipelines().path();
    EXPECT_FALSE(device->pipelines().stats().diskFileRejected);
    ASSERT_TRUE(device->pipelines().save().ok());
    test::expectNoValidationMessages(*device);
  }
  ASSERT_TRUE(std::filesystem::exists(path));
  {
    auto device = test::makeDevice(options);
    ASSERT_TRUE(device);
    EXPECT_GT(device->pipelines().stats().loadedBytes, 0u);
    test::expectNoValidationMessages(*device);
  }
  // A corrupted file is ignored with a warning, never a failure.
  {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(30);
    f.put('\x5a');
  }
  {
    auto device = test::makeDevice(options);
    ASSERT_TRUE(device);
    EXPECT_TRUE(device->pipelines().stats().diskFileRejected);
    EXPECT_EQ(device->pipelines().stats().loadedBytes, 0u);
    KernelBinary k = test::loadKernel("add_f32", 3, 4);
    EXPECT_TRUE(device->pipelines().get(k).ok());
    test::expectNoValidationMessages(*device);
  }
  std::filesystem::remove_all(dir);
}

// A cache of one pipeline: the one it drops lives while held, and when the last holder lets go
// its Vulkan objects are destroyed and its descriptor sets forgotten (reclaimed by a reset).
TEST(PipelineCacheTest, AnEvictedPipelineLivesWhileHeldThenItsSetsAreForgotten) {
  VulkanDeviceOptions options;
  options.pipelineCacheCapacity = 1;
  SINTER_VK_DEVICE_OR_SKIP(device, options);
  KernelBinary add = test::loadKernel("add_f32", 3, 4), mul = test::loadKernel("mul_f32", 3, 4);
  const uint32_t n = 64;
  std::vector<BufferRef> bufs;
  for (int i = 0; i < 3; ++i) {
    auto b = device->createBuffer(n * 4);
    ASSERT_TRUE(b.ok());
    std::vector<float> v(n, float(i + 2));
    ASSERT_TRUE(device->write(*b, asBytes(v)).ok());
    bufs.push_back(*b);
  }
  auto held = device->pipelines().get(add);
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_TRUE(device->dispatchOnce(add, bufs, bytesOf(n), {1, 1, 1}).ok());
  EXPECT_EQ(device->descriptors().stats().liveSets, 1u);
  auto other = device->pipelines().get(mul); // drops add's pipeline from the cache
  ASSERT_TRUE(other.ok()) << other.status();
  PipelineCacheStats s = device->pipelines().stats();
  EXPECT_EQ(s.cached, 1u);
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.live, 2u) << "add's pipeline is still held";
  EXPECT_NE((*held)->pipeline, VkPipeline(VK_NULL_HANDLE));
  held->reset();
  s = device->pipelines().stats();
  EXPECT_EQ(s.live, 1u);
  DescriptorStats d = device->descriptors().stats();
  EXPECT_EQ(d.liveSets, 0u);
  EXPECT_EQ(d.deadSets, 1u);
  // Built again on the next use, and still right.
  ASSERT_TRUE(device->dispatchOnce(add, bufs, bytesOf(n), {1, 1, 1}).ok());
  EXPECT_EQ(device->pipelines().stats().compiled, 3u);
  std::vector<float> y(n);
  ASSERT_TRUE(device->read(bufs[2], asWritableBytes(y)).ok());
  EXPECT_EQ(y[0], 2.0f + 3.0f);
  other->reset();
  test::expectNoValidationMessages(*device);
}

// The driver's own cache learns of every pipeline built through it: after 4 x capacity of them
// it is replaced by an empty one, and pipelines build as before.
TEST(PipelineCacheTest, TheDriverCacheIsReplacedAfterFourTimesTheCapacity) {
  VulkanDeviceOptions options;
  options.pipelineCacheCapacity = 1;
  SINTER_VK_DEVICE_OR_SKIP(device, options);
  KernelBinary add = test::loadKernel("add_f32", 3, 4), mul = test::loadKernel("mul_f32", 3, 4);
  for (int i = 0; i < 9; ++i) // each drops the other: nine builds
    ASSERT_TRUE(device->pipelines().get(i % 2 ? mul : add).ok());
  PipelineCacheStats s = device->pipelines().stats();
  EXPECT_EQ(s.compiled, 9u);
  EXPECT_EQ(s.driverCacheResets, 2u); // before the 5th and the 9th
  EXPECT_EQ(s.live, 1u);
  test::expectNoValidationMessages(*device);
}

// Forgotten sets pile up to kDeadSetsBeforeReset (or the live sets' count), then a trim resets
// the pools: bounded whatever the number of pipelines.
TEST(DescriptorCacheTest, TheSetsOfDestroyedPipelinesAreReclaimed) {
  SINTER_VK_DEVICE_OR_SKIP(device);
  KernelBinary k = test::loadKernel("add_f32", 3, 4);
  auto pipeline = device->pipelines().get(k);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  DescriptorCache cache(device->device(), /*setsPerPool=*/16, /*maxSets=*/1000);
  auto big = device->createBuffer(1 << 16);
  ASSERT_TRUE(big.ok());
  // Pipeline ids that come and go: the one real layout with a new id each time.
  Pipeline p = **pipeline;
  const uint64_t limit = DescriptorCache::kDeadSetsBeforeReset;
  for (uint64_t id = 1000; id < 1000 + 5 * limit; ++id) {
    p.id = id;
    BufferRef refs[] = {*big, *big, *big};
    ASSERT_TRUE(cache.get(p, refs).ok());
    cache.forgetPipeline(id);
    EXPECT_EQ(cache.stats().liveSets, 0u);
    cache.trim();
    ASSERT_LT(cache.stats().deadSets, limit);
  }
  EXPECT_EQ(cache.stats().resets, 5u);
  EXPECT_LE(cache.stats().pools, limit / 16) << "the pools are reused after each reset";
  test::expectNoValidationMessages(*device);
}

} // namespace
} // namespace sinter::runtime::vulkan
