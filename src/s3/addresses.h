// The addresses of an S3 endpoint, so that a client's transport threads
// connect to several of them: a store whose name resolves to many front ends
// (S3 gives eight or so per answer) spreads its connections over them, as
// the AWS CRT does, instead of every connection going to the first address
// the resolver returns. Thread-safe.
#ifndef RCKPT_SRC_S3_ADDRESSES_H_
#define RCKPT_SRC_S3_ADDRESSES_H_

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace rckpt::s3 {

// One numeric address (IPv6 without brackets) and its family (AF_INET or
// AF_INET6).
struct Address {
  int family = 0;
  std::string numeric;
};

class AddressBook {
 public:
  // The system's resolver, asked for a host the first time and again once
  // `ttl` has passed since (DNS answers of a store change; S3's live 5 s).
  explicit AddressBook(std::chrono::milliseconds ttl = std::chrono::seconds(30));

  // The host's addresses in the resolver's order; null when `host` is an
  // address itself, or does not resolve (the transport then resolves it
  // itself and reports the failure as it always has). Blocks while the
  // resolver is asked; concurrent callers of one host wait for one answer.
  std::shared_ptr<const std::vector<Address>> Lookup(const std::string& host);

 private:
  struct Entry {
    std::shared_ptr<const std::vector<Address>> addresses;
    std::chrono::steady_clock::time_point asked;
  };
  const std::chrono::milliseconds ttl_;
  std::mutex mu_;
  std::map<std::string, Entry> entries_;  // guarded by mu_
};

// libcurl's CURLOPT_RESOLVE entry ("HOST:PORT:A,B,...", IPv6 addresses in
// brackets) that gives transport thread `lane` the addresses, each family's
// turned by `lane` places so that the lanes begin on different ones, the
// families kept in the resolver's order (IPv6 first when it gave that first),
// every address kept so that a connection still falls back to the others.
std::string ResolveEntry(const std::string& host, int port, const std::vector<Address>& addresses,
                         int lane);

}  // namespace rckpt::s3

#endif  // RCKPT_SRC_S3_ADDRESSES_H_
