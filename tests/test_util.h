// Test helpers shared by every test area.
#ifndef RCKPT_TESTS_TEST_UTIL_H_
#define RCKPT_TESTS_TEST_UTIL_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "io/mem_file.h"
#include "rckpt/status.h"

#define EXPECT_OK(expr)                                  \
  do {                                                   \
    ::rckpt::Status s_ = (expr);                         \
    EXPECT_TRUE(s_.ok()) << s_.ToString();               \
  } while (0)
#define ASSERT_OK(expr)                                  \
  do {                                                   \
    ::rckpt::Status s_ = (expr);                         \
    ASSERT_TRUE(s_.ok()) << s_.ToString();               \
  } while (0)
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr)                                  \
  ASSERT_OK_AND_ASSIGN_IMPL_(RCKPT_CONCAT_(test_result_, __LINE__), lhs, rexpr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(tmp, lhs, rexpr)      \
  auto tmp = (rexpr);                                    \
  ASSERT_TRUE(tmp.ok()) << tmp.status().ToString();      \
  lhs = std::move(tmp).value()

// Matches a Status or Result whose code is `code` and whose message contains
// `substr`.
MATCHER_P2(StatusIs, code, substr,
           std::string("status ") + std::string(::rckpt::StatusCodeName(code)) +
               " containing '" + substr + "'") {
  ::rckpt::Status s = [&] {
    if constexpr (std::is_same_v<std::decay_t<arg_type>, ::rckpt::Status>) {
      return arg;
    } else {
      return arg.status();
    }
  }();
  *result_listener << "is " << s.ToString();
  return s.code() == code && s.message().find(substr) != std::string::npos;
}

namespace rckpt::testing {

// `stem` followed by the decimal `i` ("w3"), built by appending: GCC 12's -O3
// warns (-Wrestrict, a false positive: GCC bugs 105329, 105651) on
// "w" + std::to_string(i), which inserts into the temporary.
inline std::string Numbered(std::string_view stem, uint64_t i) {
  std::string s(stem);
  s += std::to_string(i);
  return s;
}

// A fresh empty directory for one test, removed at process exit is not
// guaranteed; lives under ::testing::TempDir().
inline std::string NewTempDir(const std::string& tag) {
  namespace fs = std::filesystem;
  static int counter = 0;
  fs::path p = fs::path(::testing::TempDir()) /
               ("rckpt-" + tag + "-" + std::to_string(::getpid()) + "-" +
                std::to_string(counter++));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

}  // namespace rckpt::testing

#endif  // RCKPT_TESTS_TEST_UTIL_H_
