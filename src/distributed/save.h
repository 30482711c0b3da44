// The collective save with the way its ranks write the shared file chosen
// by the caller: positioned writes (SaveDistributed) or MPI-IO (rckpt/mpi.h).
#ifndef RCKPT_SRC_DISTRIBUTED_SAVE_H_
#define RCKPT_SRC_DISTRIBUTED_SAVE_H_

#include <string>

#include "distributed/shared_file.h"
#include "rckpt/distributed.h"

namespace rckpt {

Status SaveDistributedTo(Communicator& comm, const SharedFileOpener& open, const std::string& path,
                         const RankState& state, const SaveOptions& options);

}  // namespace rckpt

#endif  // RCKPT_SRC_DISTRIBUTED_SAVE_H_
