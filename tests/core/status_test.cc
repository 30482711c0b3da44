#include <array>
#include <memory>
#include <string>
#include <vector>

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

Result<int> NotFoundInt() { return Status::NotFound("no file 'absent.rckpt'"); }

TEST(ResultDeathTest, ValueOfAnErrorPrintsItsStatus) {
  EXPECT_DEATH((void)*NotFoundInt(), "value of an error: NotFound: no file 'absent.rckpt'");
  Result<std::string> r = Status::Corruption("chunk 3 of 'w' is damaged");
  EXPECT_DEATH((void)r->size(), "Corruption: chunk 3 of 'w' is damaged");
  EXPECT_DEATH((void)r.value(), "Corruption: chunk 3 of 'w' is damaged");
}

TEST(ResultTest, AnOkStatusBecomesAnError) {
  Result<int> r = Status::Ok();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("an OK Status was given to a Result<T>"), std::string::npos);
}

// A range whose destructor says so: a loop over *F() must see it alive.
std::shared_ptr<bool> last_tracked_alive;

struct Tracked {
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
  std::array<int, 3> items = {1, 2, 3};
  Tracked() = default;
  Tracked(Tracked&& o) noexcept : alive(o.alive), items(o.items) {
    o.alive = std::make_shared<bool>(true);  // the moved-from object's own flag
  }
  Tracked& operator=(Tracked&&) = delete;
  ~Tracked() { *alive = false; }
  auto begin() const { return items.begin(); }
  auto end() const { return items.end(); }
};

Result<Tracked> MakeTracked() {
  Tracked t;
  last_tracked_alive = t.alive;
  return t;
}

TEST(ResultTest, RangeForOverATemporaryResultIteratesALiveValue) {
  int sum = 0;
  for (const int x : *MakeTracked()) {
    EXPECT_TRUE(*last_tracked_alive) << "the value was destroyed before the loop read " << x;
    sum += x;
  }
  EXPECT_EQ(sum, 6);
  EXPECT_FALSE(*last_tracked_alive);  // and destroyed after it
  for (const int x : MakeTracked().value()) {
    EXPECT_TRUE(*last_tracked_alive) << "the value was destroyed before the loop read " << x;
  }
  EXPECT_FALSE(*last_tracked_alive);
}

}  // namespace
}  // namespace rckpt
