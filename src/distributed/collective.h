// The MPI plumbing of collective saves and loads: agreeing on an outcome,
// moving byte strings between ranks.
#ifndef RCKPT_SRC_DISTRIBUTED_COLLECTIVE_H_
#define RCKPT_SRC_DISTRIBUTED_COLLECTIVE_H_

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "rckpt/status.h"

namespace rckpt {

// Every rank passes its own outcome and gets the same answer back: OK when
// every rank succeeded, else the lowest failing rank's error, its message
// prefixed "rank <r>: " unless it starts with such a prefix already.
// Collective.
Status Agree(MPI_Comm comm, const Status& local);

// IoError "<what>: <MPI's message>" unless rc is MPI_SUCCESS.
Status MpiStatus(int rc, const std::string& what);

// Every rank's `bytes`, by rank, on every rank. Collective.
std::vector<std::string> AllGatherBytes(MPI_Comm comm, const std::string& bytes);

// Every rank's `bytes`, by rank, on `root` (empty elsewhere). Collective.
std::vector<std::string> GatherBytes(MPI_Comm comm, int root, const std::string& bytes);

// `root`'s `value` on every rank. Collective.
std::string BroadcastString(MPI_Comm comm, int root, const std::string& value);

}  // namespace rckpt

#endif  // RCKPT_SRC_DISTRIBUTED_COLLECTIVE_H_
