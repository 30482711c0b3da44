// rckpt/mpi.h: the MPI Communicator (every collective behind a polled,
// time-bounded barrier) and the MPI-IO shared file of collective saves.
#include "rckpt/mpi.h"

#include <algorithm>
#include <numeric>
#include <thread>

#include "distributed/collective.h"
#include "distributed/save.h"

namespace rckpt {
namespace {

Status MpiStatus(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status::IoError(what + ": " + std::string(text, static_cast<size_t>(len)));
}

// MPI counts are ints: large regions are written in pieces of this size.
constexpr uint64_t kMaxWriteBytes = 1ull << 30;

class MpiFile : public SharedFile {
 public:
  MpiFile(MpiCommunicator& comm, MPI_File fh) : comm_(comm), fh_(fh) {}
  ~MpiFile() override {
    if (fh_ != MPI_FILE_NULL) MPI_File_close(&fh_);
  }

  Status WriteAt(uint64_t offset, std::span<const std::byte> data) override {
    for (uint64_t done = 0; done < data.size();) {
      const int n = static_cast<int>(std::min<uint64_t>(kMaxWriteBytes, data.size() - done));
      MPI_Status st;
      RCKPT_RETURN_IF_ERROR(MpiStatus(
          MPI_File_write_at(fh_, static_cast<MPI_Offset>(offset + done), data.data() + done, n,
                            MPI_BYTE, &st),
          "write at offset " + std::to_string(offset + done)));
      int written = 0;
      MPI_Get_count(&st, MPI_BYTE, &written);
      if (written != n) {
        return Status::IoError("short write at offset " + std::to_string(offset + done) + ": " +
                               std::to_string(written) + " of " + std::to_string(n) + " bytes");
      }
      done += static_cast<uint64_t>(n);
    }
    return Status::Ok();
  }

  // MPI_File_sync and MPI_File_close are collective: they run only once
  // every rank is known to have come (else the handle is left to the
  // destructor's close, and the job to its timeout).
  Status SyncAndClose() override {
    RCKPT_RETURN_IF_ERROR(comm_.Barrier());
    Status s = MpiStatus(MPI_File_sync(fh_), "sync");
    Status closed = MpiStatus(MPI_File_close(&fh_), "close");
    fh_ = MPI_FILE_NULL;
    return s.ok() ? closed : s;
  }

 private:
  MpiCommunicator& comm_;
  MPI_File fh_;
};

Result<std::unique_ptr<SharedFile>> OpenMpiFile(MpiCommunicator& comm, const std::string& path) {
  RCKPT_RETURN_IF_ERROR(comm.Barrier());
  MPI_File fh = MPI_FILE_NULL;
  Status opened = MpiStatus(
      MPI_File_open(comm.comm(), path.c_str(), MPI_MODE_WRONLY, MPI_INFO_NULL, &fh),
      "open '" + path + "'");
  RCKPT_RETURN_IF_ERROR(opened);
  return std::unique_ptr<SharedFile>(std::make_unique<MpiFile>(comm, fh));
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::chrono::milliseconds timeout)
    : comm_(comm), timeout_(timeout) {
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
}

Status MpiCommunicator::Arrive(const char* collective) {
  MPI_Request request;
  RCKPT_RETURN_IF_ERROR(MpiStatus(MPI_Ibarrier(comm_, &request), collective));
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    int done = 0;
    RCKPT_RETURN_IF_ERROR(MpiStatus(MPI_Test(&request, &done, MPI_STATUS_IGNORE), collective));
    if (done) return Status::Ok();
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::IoError(
          WithRank(rank_, std::string(collective) + " timed out after " +
                              std::to_string(timeout_.count() / 1000.0) +
                              " s waiting for the other ranks (a rank failed, exited or is "
                              "stuck; the MPI job should be aborted)"));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(5));
  }
}

Result<std::vector<std::string>> MpiCommunicator::AllGather(std::string_view bytes) {
  RCKPT_RETURN_IF_ERROR(Arrive("allgather"));
  int n = static_cast<int>(bytes.size());
  std::vector<int> counts(size_), displs(size_);
  RCKPT_RETURN_IF_ERROR(MpiStatus(
      MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, comm_), "allgather"));
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), 0);
  std::string all(static_cast<size_t>(displs.back() + counts.back()), '\0');
  RCKPT_RETURN_IF_ERROR(MpiStatus(MPI_Allgatherv(bytes.data(), n, MPI_BYTE, all.data(),
                                                 counts.data(), displs.data(), MPI_BYTE, comm_),
                                  "allgather"));
  std::vector<std::string> out(size_);
  for (int r = 0; r < size_; ++r) out[r] = all.substr(displs[r], counts[r]);
  return out;
}

Result<std::vector<std::string>> MpiCommunicator::Gather(int root, std::string_view bytes) {
  RCKPT_RETURN_IF_ERROR(Arrive("gather"));
  const bool is_root = rank_ == root;
  int n = static_cast<int>(bytes.size());
  std::vector<int> counts(is_root ? size_ : 0), displs(is_root ? size_ : 0);
  RCKPT_RETURN_IF_ERROR(
      MpiStatus(MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, root, comm_), "gather"));
  std::string all;
  if (is_root) {
    std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), 0);
    all.resize(static_cast<size_t>(displs.back() + counts.back()));
  }
  RCKPT_RETURN_IF_ERROR(MpiStatus(MPI_Gatherv(bytes.data(), n, MPI_BYTE, all.data(), counts.data(),
                                              displs.data(), MPI_BYTE, root, comm_),
                                  "gather"));
  std::vector<std::string> out;
  if (!is_root) return out;
  for (int r = 0; r < size_; ++r) out.push_back(all.substr(displs[r], counts[r]));
  return out;
}

Result<std::string> MpiCommunicator::Broadcast(int root, std::string_view bytes) {
  RCKPT_RETURN_IF_ERROR(Arrive("broadcast"));
  uint64_t n = bytes.size();
  RCKPT_RETURN_IF_ERROR(MpiStatus(MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm_), "broadcast"));
  std::string out = rank_ == root ? std::string(bytes) : std::string(n, '\0');
  RCKPT_RETURN_IF_ERROR(MpiStatus(
      MPI_Bcast(out.data(), static_cast<int>(n), MPI_BYTE, root, comm_), "broadcast"));
  return out;
}

Status MpiCommunicator::Barrier() { return Arrive("barrier"); }

Status SaveDistributed(MpiCommunicator& comm, const std::string& path, const RankState& state,
                       const SaveOptions& options) {
  const SharedFileOpener open = [&comm](Communicator&, const std::string& tmp) {
    return OpenMpiFile(comm, tmp);
  };
  return SaveDistributedTo(comm, open, path, state, options);
}

Status SaveDistributed(MPI_Comm comm, const std::string& path, const RankState& state,
                       const SaveOptions& options) {
  MpiCommunicator c(comm);
  return SaveDistributed(c, path, state, options);
}

Result<RankLoad> LoadDistributed(MPI_Comm comm, const std::string& path,
                                 const std::vector<BlockRequest>& wants,
                                 const LoadOptions& options) {
  MpiCommunicator c(comm);
  return LoadDistributed(static_cast<Communicator&>(c), path, wants, options);
}

}  // namespace rckpt
