// Sharded checkpoints over MPI (library rckpt::mpi, built where MPI is
// found): a Communicator over an MPI communicator, and SaveDistributed /
// LoadDistributed taking an MPI_Comm, whose save writes the file with
// MPI-IO. The model and the guarantees are rckpt/distributed.h's.
#ifndef RCKPT_MPI_H_
#define RCKPT_MPI_H_

#include <mpi.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "rckpt/distributed.h"

namespace rckpt {

// The Communicator of the ranks of `comm` (which must outlive it). Each
// collective first waits, at most `timeout`, until every rank has entered
// it (a non-blocking barrier, polled), then runs the MPI collective; a rank
// that never comes makes the others return IoError "rank <r>: <collective>
// timed out after <t> s ..." instead of hanging. MPI cannot cancel the
// barrier left pending then: after a timeout, abort the job.
class MpiCommunicator : public Communicator {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::minutes(30);

  explicit MpiCommunicator(MPI_Comm comm, std::chrono::milliseconds timeout = kDefaultTimeout);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MPI_Comm comm() const { return comm_; }
  Result<std::vector<std::string>> AllGather(std::string_view bytes) override;
  Result<std::string> Broadcast(int root, std::string_view bytes) override;
  Result<std::vector<std::string>> Gather(int root, std::string_view bytes) override;
  Status Barrier() override;

 private:
  // Waits until every rank has called Arrive (the same number of times).
  Status Arrive(const char* collective);

  MPI_Comm comm_;
  std::chrono::milliseconds timeout_;
  int rank_ = 0;
  int size_ = 1;
};

// SaveDistributed (rckpt/distributed.h) over MPI, writing the file with
// MPI-IO (MPI_File_write_at into each rank's extent, MPI_File_sync). The
// MPI_Comm overloads use an MpiCommunicator with the default timeout.
Status SaveDistributed(MpiCommunicator& comm, const std::string& path, const RankState& state,
                       const SaveOptions& options = {});
Status SaveDistributed(MPI_Comm comm, const std::string& path, const RankState& state,
                       const SaveOptions& options = {});

// LoadDistributed (rckpt/distributed.h) over MPI.
Result<RankLoad> LoadDistributed(MPI_Comm comm, const std::string& path,
                                 const std::vector<BlockRequest>& wants,
                                 const LoadOptions& options = {});

}  // namespace rckpt

#endif  // RCKPT_MPI_H_
