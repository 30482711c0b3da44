#include "test_util.h"

namespace rckpt {
namespace {

TEST(StatusTest, MessagesAreOneLineWhateverTheyQuote) {
  Status s = Status::Corruption("tensor 'a\nb\x01' is bad");
  EXPECT_EQ(s.message(), "tensor 'a\\x0ab\\x01' is bad");
  EXPECT_EQ(s.WithContext("file\r").message(), "file\\x0d: tensor 'a\\x0ab\\x01' is bad");
  EXPECT_EQ(Status::IoError("plain ünïcode").message(), "plain ünïcode");
}

}  // namespace
}  // namespace rckpt
