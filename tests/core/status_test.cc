#include "test_util.h"

namespace rckpt {
namespace {

TEST(StatusTest, MessagesAreOneLineWhateverTheyQuote) {
  Status s = Status::Corruption("tensor 'a\nb\x01' is bad");
  EXPECT_EQ(s.message(), "tensor 'a\\x0ab\\x01' is bad");
  EXPECT_EQ(s.WithContext("file\r").message(), "file\\x0d: tensor 'a\\x0ab\\x01' is bad");
  EXPECT_EQ(Status::IoError("plain ünïcode").message(), "plain ünïcode");
  // Bytes that are not UTF-8 are quoted too; well-formed characters stay.
  EXPECT_EQ(Status::Corruption("name 'w\x80\xc3\xa9\xc3' bad").message(),
            "name 'w\\x80\xc3\xa9\\xc3' bad");
}

}  // namespace
}  // namespace rckpt
