#include "s3/addresses.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>

namespace rckpt::s3 {
namespace {

bool IsNumeric(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return host.empty() || host.front() == '[' || ::inet_pton(AF_INET, host.c_str(), buf) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

std::vector<Address> Resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  addrinfo* list = nullptr;
  std::vector<Address> out;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &list) != 0) return out;
  for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw =
        a->ai_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) ||
        ::inet_ntop(a->ai_family, raw, text, sizeof text) == nullptr) {
      continue;
    }
    Address address{a->ai_family, text};
    const bool seen = std::any_of(out.begin(), out.end(),
                                  [&](const Address& x) { return x.numeric == address.numeric; });
    if (!seen) out.push_back(std::move(address));
  }
  ::freeaddrinfo(list);
  return out;
}

}  // namespace

AddressBook::AddressBook(std::chrono::milliseconds ttl) : ttl_(ttl) {}

std::shared_ptr<const std::vector<Address>> AddressBook::Lookup(const std::string& host) {
  if (IsNumeric(host)) return nullptr;
  // One lock over the resolver's call: callers of a client ask for one or
  // two hosts, and the answer is cached.
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  auto it = entries_.find(host);
  if (it != entries_.end() && now - it->second.asked < ttl_) return it->second.addresses;
  std::vector<Address> found = Resolve(host);
  std::shared_ptr<const std::vector<Address>> addresses;
  if (!found.empty()) addresses = std::make_shared<const std::vector<Address>>(std::move(found));
  entries_[host] = Entry{addresses, now};
  return addresses;
}

std::string ResolveEntry(const std::string& host, int port, const std::vector<Address>& addresses,
                         int lane) {
  std::vector<int> families;
  for (const Address& a : addresses) {
    if (std::find(families.begin(), families.end(), a.family) == families.end()) {
      families.push_back(a.family);
    }
  }
  std::string entry = host + ":" + std::to_string(port) + ":";
  bool first = true;
  for (int family : families) {
    std::vector<const Address*> of;
    for (const Address& a : addresses) {
      if (a.family == family) of.push_back(&a);
    }
    const size_t turn = static_cast<size_t>(std::max(0, lane)) % of.size();
    for (size_t i = 0; i < of.size(); ++i) {
      const Address& a = *of[(turn + i) % of.size()];
      if (!first) entry += ",";
      first = false;
      entry += a.family == AF_INET6 ? "[" + a.numeric + "]" : a.numeric;
    }
  }
  return entry;
}

}  // namespace rckpt::s3
