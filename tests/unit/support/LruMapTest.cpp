// LruMapTest.cpp - tests of support/LruMap.h: the bound, the order of eviction, and values that
// outlive their entry when shared.
#include "support/LruMap.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace sinter {
namespace {

TEST(LruMapTest, KeepsTheMostRecentlyUsedWithinItsCapacity) {
  LruMap<std::string, int> map(2);
  map.insert("a", 1);
  map.insert("b", 2);
  ASSERT_NE(map.find("a"), nullptr); // a is now more recent than b
  map.insert("c", 3);                // drops b
  EXPECT_EQ(map.size(), 2u);
  EXPECT_EQ(map.evictions(), 1u);
  EXPECT_FALSE(map.contains("b"));
  ASSERT_NE(map.find("a"), nullptr);
  EXPECT_EQ(*map.find("a"), 1);
  EXPECT_EQ(*map.find("c"), 3);
  EXPECT_EQ(map.find("b"), nullptr);
}

TEST(LruMapTest, ReplacingAValueEvictsNothing) {
  LruMap<int, int> map(2);
  map.insert(1, 10);
  map.insert(2, 20);
  EXPECT_EQ(map.insert(1, 11), 11);
  EXPECT_EQ(map.size(), 2u);
  EXPECT_EQ(map.evictions(), 0u);
  map.insert(3, 30); // 2 is the least recently used now
  EXPECT_TRUE(map.contains(1));
  EXPECT_FALSE(map.contains(2));
}

TEST(LruMapTest, ACapacityOfZeroKeepsOne) {
  LruMap<int, int> map(0);
  EXPECT_EQ(map.capacity(), 1u);
  map.insert(1, 1);
  map.insert(2, 2);
  EXPECT_EQ(map.size(), 1u);
  EXPECT_TRUE(map.contains(2));
}

// The compilers' use: an evicted shared value lives while someone else holds it.
TEST(LruMapTest, AnEvictedSharedValueLivesWhileHeld) {
  LruMap<int, std::shared_ptr<int>> map(1);
  std::weak_ptr<int> first = map.insert(1, std::make_shared<int>(1));
  std::shared_ptr<int> held = *map.find(1);
  map.insert(2, std::make_shared<int>(2));
  EXPECT_FALSE(map.contains(1));
  EXPECT_FALSE(first.expired());
  held.reset();
  EXPECT_TRUE(first.expired());
  std::weak_ptr<int> second = *map.find(2);
  map.clear();
  EXPECT_TRUE(second.expired());
  EXPECT_EQ(map.size(), 0u);
  EXPECT_EQ(map.evictions(), 1u);
}

} // namespace
} // namespace sinter
