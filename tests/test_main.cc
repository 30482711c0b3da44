// The main of every test binary: gtest's, plus --cuda-standin and
// --require-gpu (test_runtime.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "test_runtime.h"

namespace {

// After each test in --cuda-standin mode: what the stand-in saw go wrong
// fails the binary (ctest runs one test per process).
class StandinCheck : public ::testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const std::string problems = rckpt::CudaStandinProblems();
    if (problems.empty()) return;
    std::fprintf(stderr, "[  STAND-IN ] %s.%s misused the CUDA driver:\n%s", info.test_suite_name(),
                 info.name(), problems.c_str());
    failed = true;
  }
  bool failed = false;
};

}  // namespace

int main(int argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--cuda-standin") == 0) {
      rckpt::SetUsingCudaStandin(true);
    } else if (std::strcmp(argv[i], "--require-gpu") == 0) {
      rckpt::SetRequireGpu(true);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  ::testing::InitGoogleTest(&argc, argv);
  StandinCheck* check = nullptr;
  if (rckpt::UsingCudaStandin()) {
    check = new StandinCheck();  // owned by gtest
    ::testing::UnitTest::GetInstance()->listeners().Append(check);
  }
  const int rc = RUN_ALL_TESTS();
  return rc != 0 || (check != nullptr && check->failed) ? 1 : 0;
}
