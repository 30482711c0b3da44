#include "distributed/collective.h"

#include <numeric>

namespace rckpt {
namespace {

int RankOf(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  return rank;
}

int SizeOf(MPI_Comm comm) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  return size;
}

// Whether `message` starts "rank <r>: ".
bool NamesRank(const std::string& message) {
  if (message.rfind("rank ", 0) != 0) return false;
  size_t i = 5;
  while (i < message.size() && message[i] >= '0' && message[i] <= '9') ++i;
  return i > 5 && message.compare(i, 2, ": ") == 0;
}

}  // namespace

Status Agree(MPI_Comm comm, const Status& local) {
  // The lowest failing rank, or `size` when none failed.
  const int size = SizeOf(comm);
  int mine = local.ok() ? size : RankOf(comm);
  int first = size;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == size) return Status::Ok();
  int code = static_cast<int>(local.code());
  MPI_Bcast(&code, 1, MPI_INT, first, comm);
  const std::string message = BroadcastString(comm, first, local.message());
  // An error that names its rank already (agreed on in an earlier step, or
  // rank 0's verdict on another rank's part) keeps that rank.
  if (NamesRank(message)) return Status(static_cast<StatusCode>(code), message);
  return Status(static_cast<StatusCode>(code), "rank " + std::to_string(first) + ": " + message);
}

Status MpiStatus(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status::IoError(what + ": " + std::string(text, len));
}

std::vector<std::string> AllGatherBytes(MPI_Comm comm, const std::string& bytes) {
  const int size = SizeOf(comm);
  int n = static_cast<int>(bytes.size());
  std::vector<int> counts(size), displs(size);
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, comm);
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), 0);
  std::string all(static_cast<size_t>(displs.back() + counts.back()), '\0');
  MPI_Allgatherv(bytes.data(), n, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE,
                 comm);
  std::vector<std::string> out(size);
  for (int r = 0; r < size; ++r) out[r] = all.substr(displs[r], counts[r]);
  return out;
}

std::vector<std::string> GatherBytes(MPI_Comm comm, int root, const std::string& bytes) {
  const int size = SizeOf(comm);
  const bool is_root = RankOf(comm) == root;
  int n = static_cast<int>(bytes.size());
  std::vector<int> counts(is_root ? size : 0), displs(is_root ? size : 0);
  MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, root, comm);
  std::string all;
  if (is_root) {
    std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), 0);
    all.resize(static_cast<size_t>(displs.back() + counts.back()));
  }
  MPI_Gatherv(bytes.data(), n, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, root,
              comm);
  std::vector<std::string> out;
  if (!is_root) return out;
  for (int r = 0; r < size; ++r) out.push_back(all.substr(displs[r], counts[r]));
  return out;
}

std::string BroadcastString(MPI_Comm comm, int root, const std::string& value) {
  uint64_t n = value.size();
  MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm);
  std::string out = RankOf(comm) == root ? value : std::string(n, '\0');
  MPI_Bcast(out.data(), static_cast<int>(n), MPI_BYTE, root, comm);
  return out;
}

}  // namespace rckpt
