// The S3 test server killed and started again in the middle of a load: the
// load's retries carry it over the gap. In a binary of its own, run alone
// (RUN_SERIAL): every other S3 test would meet the same gap.
#include <cstring>

#include "rckpt/io.h"
#include "rckpt/s3.h"
#include "s3/s3_test_env.h"

namespace rckpt {
namespace {

using testing::S3TestServer;

Tensor Pattern(uint64_t bytes, uint64_t seed, int i) {
  Tensor t = *Tensor::Empty(DType::kU8, {static_cast<int64_t>(bytes)});
  auto* p = static_cast<uint8_t*>(t.data());
  uint64_t x = seed * 1000003 + static_cast<uint64_t>(i) * 7919 + 1;
  for (uint64_t k = 0; k < bytes; ++k) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    p[k] = static_cast<uint8_t>(x >> 56);
  }
  return t;
}

// Loads `url` while the server is killed and started again; the load's
// retries carry it over the gap.
TEST(S3RestartTest, AServerKilledAndRestartedMidLoad) {
  RCKPT_REQUIRE_S3_SERVER(server);
  if (server.server_dir.empty()) GTEST_SKIP() << "RCKPT_TEST_S3_SERVER_DIR is not set";
  const std::string url = server.UniquePrefix() + "restart.rckpt";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<FileSystem> direct, NewS3FileSystem(server.Options()));
  Checkpoint ck;
  for (int i = 0; i < 8; ++i) {
    ASSERT_OK(ck.AddTensor("model", testing::Numbered("w", i),
                           Pattern(4 << 20, 12, i)));
  }
  ASSERT_OK(Save(url, ck, {.fs = direct.get()}));
  // Through the proxy, each request 300 ms late: the load is still reading
  // when the server goes (its first progress report comes after one chunk).
  RCKPT_REQUIRE_FAULT_PROXY(proxy, server);
  ASSERT_OK(proxy->Delay(300));
  S3Options o = server.Options(proxy->endpoint());
  // Enough tries to outlast a restart however slow (s3_server.sh waits up
  // to 90 s for the server).
  o.max_requests = 2;
  o.max_attempts = 100;
  o.retry_max_delay_ms = 2000;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<FileSystem> patient, NewS3FileSystem(o));
  bool restarted = false;
  LoadOptions lo;
  lo.fs = patient.get();
  lo.threads = 1;
  lo.progress = [&](uint64_t done, uint64_t) {
    if (!restarted && done > 0) {
      restarted = true;
      EXPECT_EQ(testing::ServerControl(server, "restart"), 0);
    }
    return true;
  };
  ASSERT_OK_AND_ASSIGN(Checkpoint back, Load(url, lo));
  EXPECT_TRUE(restarted);
  for (int i = 0; i < 8; ++i) {
    const Tensor want = Pattern(4 << 20, 12, i);
    const TensorEntry* t = back.FindTensor(testing::Numbered("w", i));
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(std::memcmp(t->tensor.data(), want.data(), want.nbytes()), 0) << i;
  }
}

}  // namespace
}  // namespace rckpt
