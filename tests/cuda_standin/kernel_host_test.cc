// The un-shuffle kernels, compiled for the host from the very source the
// shipped image is made from, against the CPU un-shuffle: every element
// size from 2 to 32, whole and partial tiles, trailing partial elements,
// one block, three blocks and the grid the launcher plans.
#include "kernel_host.h"

#include <cstring>
#include <random>
#include <vector>

#include "codec/codec.h"
#include "kernel_image.h"
#include "test_util.h"
#include "unshuffle_params.h"

namespace rckpt::cuda {
namespace {

std::vector<std::byte> Random(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<std::byte> out(n);
  for (std::byte& b : out) b = static_cast<std::byte>(gen());
  return out;
}

// Un-shuffles `bytes` bytes with the kernel the launcher picks, over `blocks`
// blocks (0: the planned grid), the tail copied as the launcher does.
std::vector<std::byte> KernelUnshuffle(const std::vector<std::byte>& shuffled, uint32_t elem,
                                       uint32_t blocks) {
  const UnshuffleLaunch plan = PlanUnshuffle(shuffled.size(), elem);
  std::vector<std::byte> out(shuffled.size(), std::byte{0xEE});
  if (plan.kernel != nullptr) {
    EXPECT_TRUE(host::RunUnshuffleKernel(plan.kernel, blocks == 0 ? plan.blocks : blocks,
                                         kUnshuffleThreads, reinterpret_cast<uint8_t*>(out.data()),
                                         reinterpret_cast<const uint8_t*>(shuffled.data()),
                                         plan.n_elem, elem));
  }
  std::copy(shuffled.begin() + plan.body_bytes, shuffled.end(), out.begin() + plan.body_bytes);
  return out;
}

struct Case {
  uint64_t n_elem;
  uint32_t tail;  // bytes of a trailing partial element (< elem)
};

TEST(KernelHostTest, KernelsInvertTheShuffleForEveryElementSizeTileAndTail) {
  const Case cases[] = {{1, 0}, {7, 1}, {kUnshuffleTile - 1, 0}, {kUnshuffleTile, 1},
                        {kUnshuffleTile + 1, 0}, {3 * kUnshuffleTile + 5, 1}};
  for (uint32_t elem = 2; elem <= 32; ++elem) {
    for (const Case& c : cases) {
      const uint32_t tail = std::min(c.tail, elem - 1);
      const size_t n = c.n_elem * elem + tail;
      const std::vector<std::byte> raw = Random(n, elem * 1000 + static_cast<uint32_t>(c.n_elem));
      std::vector<std::byte> shuffled(n);
      ShuffleBytes(raw, shuffled, elem);
      ASSERT_EQ(KernelUnshuffle(shuffled, elem, 0), raw)
          << "elem " << elem << ", " << c.n_elem << " elements, tail " << tail;
    }
  }
}

TEST(KernelHostTest, OneBlockThreeBlocksAndTheFullGridAgree) {
  for (uint32_t elem : {2u, 4u, 8u, 16u, 17u, 32u}) {
    const uint64_t n_elem = 5 * kUnshuffleTile + 3;
    const std::vector<std::byte> raw = Random(n_elem * elem, elem);
    std::vector<std::byte> shuffled(raw.size());
    ShuffleBytes(raw, shuffled, elem);
    const UnshuffleLaunch plan = PlanUnshuffle(raw.size(), elem);
    EXPECT_EQ(plan.blocks, 6u) << "one block per tile";
    for (uint32_t blocks : {1u, 3u, plan.blocks}) {
      EXPECT_EQ(KernelUnshuffle(shuffled, elem, blocks), raw)
          << "elem " << elem << ", " << blocks << " blocks";
    }
  }
}

TEST(KernelHostTest, LauncherPicksTheTiledKernelUpToItsElementSize) {
  EXPECT_STREQ(PlanUnshuffle(4096, kMaxTiledElem).kernel, kUnshuffleTiledKernel);
  EXPECT_STREQ(PlanUnshuffle(4096, kMaxTiledElem + 1).kernel, kUnshuffleGenericKernel);
  EXPECT_EQ(PlanUnshuffle(3, 4).kernel, nullptr) << "no whole element: only the tail copy";
  EXPECT_EQ(PlanUnshuffle(uint64_t{1} << 40, 2).blocks, kMaxUnshuffleBlocks);
}

TEST(KernelHostTest, TheEmbeddedImageIsAFatbinWithItsStamp) {
  const std::span<const std::byte> image = UnshuffleKernelImage();
  ASSERT_GE(image.size(), 16u);
  uint32_t magic = 0;
  std::memcpy(&magic, image.data(), 4);
  EXPECT_EQ(magic, 0xBA55ED50u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(image.data()) % 8, 0u) << "the driver reads 8-byte fields";
  EXPECT_THAT(UnshuffleKernelSummary(), ::testing::HasSubstr("sm_90"));
  EXPECT_THAT(UnshuffleKernelSummary(), ::testing::HasSubstr("PTX compute_75"));
}

}  // namespace
}  // namespace rckpt::cuda
