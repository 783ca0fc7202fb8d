// What the communicators share (kiln/comm/comm_util.h) that needs no peers:
// when a device communicator may hand out its windows as device peers.

#include <gtest/gtest.h>

#include <string>

#include "kiln/comm/comm_util.h"

namespace kiln::testing {
namespace {

using comm::device_peers_unavailable;

TEST(CommUtilTest, DevicePeersNeedAWindowEveryRankReachesByLoadAndStore) {
  EXPECT_EQ(device_peers_unavailable(true, 1, 1), nullptr);
  EXPECT_EQ(device_peers_unavailable(true, 4, 4), nullptr);
  EXPECT_EQ(device_peers_unavailable(true, kMaxDevicePeers, kMaxDevicePeers), nullptr);
  // Ordinary device memory (no window), whatever the team.
  ASSERT_NE(device_peers_unavailable(false, 4, 4), nullptr);
  EXPECT_NE(std::string(device_peers_unavailable(false, 4, 4)).find("not a symmetric window"), std::string::npos);
  // Two nodes of four GPUs: the LSA team holds four of eight ranks.
  ASSERT_NE(device_peers_unavailable(true, 4, 8), nullptr);
  EXPECT_NE(std::string(device_peers_unavailable(true, 4, 8)).find("load/store-accessible"), std::string::npos);
  // More ranks than DevicePeers holds, even all reachable.
  ASSERT_NE(device_peers_unavailable(true, kMaxDevicePeers + 1, kMaxDevicePeers + 1), nullptr);
  EXPECT_NE(std::string(device_peers_unavailable(true, 9, 9)).find("more ranks"), std::string::npos);
}

}  // namespace
}  // namespace kiln::testing
