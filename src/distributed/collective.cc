#include "distributed/collective.h"

#include <cstdint>
#include <cstring>

namespace rckpt {
namespace {

// Whether `message` starts "rank <r>: ".
bool NamesRank(const std::string& message) {
  if (message.rfind("rank ", 0) != 0) return false;
  size_t i = 5;
  while (i < message.size() && message[i] >= '0' && message[i] <= '9') ++i;
  return i > 5 && message.compare(i, 2, ": ") == 0;
}

// One rank's message: 'o' and the payload when its outcome is OK, else 'e',
// the status code (4 bytes) and the message.
std::string EncodeOutcome(const Status& local, std::string_view payload) {
  std::string out;
  if (local.ok()) {
    out.reserve(1 + payload.size());
    out += 'o';
    out += payload;
    return out;
  }
  const int32_t code = static_cast<int32_t>(local.code());
  out += 'e';
  out.append(reinterpret_cast<const char*>(&code), sizeof code);
  out += local.message();
  return out;
}

// The lowest failing rank's error among `all`, rank-prefixed; else OK, and
// each message reduced to its payload.
Status FirstFailure(std::vector<std::string>& all) {
  for (size_t r = 0; r < all.size(); ++r) {
    const std::string& o = all[r];
    if (o.empty() || (o[0] != 'o' && (o[0] != 'e' || o.size() < 1 + sizeof(int32_t)))) {
      return Status::IoError("collective agreement: a malformed outcome from rank " +
                             std::to_string(r));
    }
    if (o[0] == 'o') continue;
    int32_t code = 0;
    std::memcpy(&code, o.data() + 1, sizeof code);
    // An error that names its rank already (agreed on in an earlier step, or
    // rank 0's verdict on another rank's part) keeps that rank.
    return Status(static_cast<StatusCode>(code),
                  WithRank(static_cast<int>(r), o.substr(1 + sizeof code)));
  }
  for (std::string& o : all) o.erase(0, 1);
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> Communicator::Gather(int root, std::string_view bytes) {
  RCKPT_ASSIGN_OR_RETURN(std::vector<std::string> all, AllGather(bytes));
  if (rank() != root) all.clear();
  return all;
}

Status Communicator::Barrier() { return AllGather({}).status(); }

std::string WithRank(int rank, const std::string& message) {
  return NamesRank(message) ? message : "rank " + std::to_string(rank) + ": " + message;
}

Result<std::vector<std::string>> AgreeAndAllGather(Communicator& comm, const Status& local,
                                                   std::string_view payload) {
  RCKPT_ASSIGN_OR_RETURN(std::vector<std::string> all,
                         comm.AllGather(EncodeOutcome(local, payload)));
  RCKPT_RETURN_IF_ERROR(FirstFailure(all));
  return all;
}

Status Agree(Communicator& comm, const Status& local) {
  return AgreeAndAllGather(comm, local, {}).status();
}

Result<std::vector<std::string>> GatherOutcomes(Communicator& comm, int root, const Status& local,
                                                std::string_view payload) {
  RCKPT_ASSIGN_OR_RETURN(std::vector<std::string> all,
                         comm.Gather(root, EncodeOutcome(local, payload)));
  if (comm.rank() != root) {
    if (!local.ok()) return local;
    return std::vector<std::string>();
  }
  RCKPT_RETURN_IF_ERROR(FirstFailure(all));
  return all;
}

}  // namespace rckpt
