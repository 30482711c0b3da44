// The store's addresses as the transport's lanes use them: each lane begins
// at a different address of each family, and keeps every other one to fall
// back to.
#include "s3/addresses.h"

#include <sys/socket.h>

#include "s3/http.h"
#include "test_util.h"

namespace rckpt::s3 {
namespace {

const std::vector<Address> kMixed = {
    {AF_INET6, "2600:1f18::1"}, {AF_INET6, "2600:1f18::2"}, {AF_INET, "52.216.0.1"},
    {AF_INET, "52.216.0.2"},    {AF_INET, "52.216.0.3"},
};

TEST(AddressesTest, EachLaneBeginsAtAnotherAddressOfEachFamily) {
  EXPECT_EQ(ResolveEntry("s3.amazonaws.com", 443, kMixed, 0),
            "s3.amazonaws.com:443:[2600:1f18::1],[2600:1f18::2],52.216.0.1,52."
            "216.0.2,52.216.0.3");
  EXPECT_EQ(ResolveEntry("s3.amazonaws.com", 443, kMixed, 1),
            "s3.amazonaws.com:443:[2600:1f18::2],[2600:1f18::1],52.216.0.2,52."
            "216.0.3,52.216.0.1");
  EXPECT_EQ(ResolveEntry("s3.amazonaws.com", 443, kMixed, 5),
            "s3.amazonaws.com:443:[2600:1f18::2],[2600:1f18::1],52.216.0.3,52."
            "216.0.1,52.216.0.2");
}

TEST(AddressesTest, TheResolversFamilyOrderIsKept) {
  const std::vector<Address> v4_first = {
      {AF_INET, "10.0.0.1"}, {AF_INET6, "fd00::1"}, {AF_INET, "10.0.0.2"}};
  EXPECT_EQ(ResolveEntry("minio.local", 9000, v4_first, 1),
            "minio.local:9000:10.0.0.2,10.0.0.1,[fd00::1]");
  EXPECT_EQ(ResolveEntry("one", 80, {{AF_INET, "10.0.0.9"}}, 3), "one:80:10.0.0.9");
}

TEST(AddressesTest, AnAddressIsNotLookedUp) {
  AddressBook book;
  EXPECT_EQ(book.Lookup("127.0.0.1"), nullptr);
  EXPECT_EQ(book.Lookup("[::1]"), nullptr);
  EXPECT_EQ(book.Lookup("::1"), nullptr);
  EXPECT_EQ(book.Lookup(""), nullptr);
}

TEST(AddressesTest, ANameIsLookedUpOnceWithinItsLifetime) {
  AddressBook book(std::chrono::hours(1));
  std::shared_ptr<const std::vector<Address>> first = book.Lookup("localhost");
  if (first == nullptr) GTEST_SKIP() << "localhost does not resolve here";
  EXPECT_FALSE(first->empty());
  // The same answer, not asked again.
  EXPECT_EQ(book.Lookup("localhost").get(), first.get());
  // A name that does not resolve: null, and the transport resolves it itself.
  EXPECT_EQ(book.Lookup("no-such-host.invalid"), nullptr);
}

TEST(AddressesTest, ManyConnectionsRunOnSeveralLanes) {
  EXPECT_EQ(HttpClient::LanesFor(1), 1);
  EXPECT_EQ(HttpClient::LanesFor(4), 1);
  EXPECT_GE(HttpClient::LanesFor(16), 2);
  EXPECT_LE(HttpClient::LanesFor(1024), 8);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<HttpClient> client, HttpClient::Create(16, ""));
  EXPECT_EQ(client->lanes(), HttpClient::LanesFor(16));
}

}  // namespace
}  // namespace rckpt::s3
