// Sharded checkpoints for multi-process jobs over MPI: every rank of a
// communicator writes its part of the state into one .rckpt file in
// parallel, and a job of any size reads back the blocks each of its ranks
// wants. Built only where MPI is found (library rckpt::distributed).
//
// The model. A rank holds
//   - sharded tensors: its block of a tensor with a global name, global shape
//     and dtype (offsets and sizes per dimension, as row, column or flat
//     sharding produce); the blocks of all ranks together tile the shape;
//   - whole tensors: replicated ones (each is written once, by the lowest
//     rank that holds a tensor of that name; the others' copies are not
//     written), or ones only it has;
//   - its RNG records and its own tree (a data-loader cursor), kept per rank:
//     saved as "rank<r>/<name>" and as the tree's "ranks"[r];
//   - rank 0 also gives the common tree (epoch, scheduler) and metadata.
// The file's tree is the map {"common": <rank 0's common tree>,
// "ranks": [<rank 0's tree>, <rank 1's>, ...]}, and its metadata gains
// "rckpt.world_size". Single-process tools (inspect, verify, diff, convert,
// load) see every sharded tensor as one whole tensor.
//
// Thread-safety: the functions are collective: every rank of `comm` calls
// them, with the same path and options, from one thread at a time.
#ifndef RCKPT_DISTRIBUTED_H_
#define RCKPT_DISTRIBUTED_H_

#include <mpi.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rckpt/checkpoint.h"
#include "rckpt/options.h"

namespace rckpt {

// This rank's block of a sharded tensor.
struct ShardPart {
  std::string section;
  std::string name;            // the global name, the same on every rank
  Shape shape;                 // the global shape, the same on every rank
  Shape offsets;               // where `block` starts in the global shape
  Tensor block;                // its dtype is the tensor's
  std::optional<Role> role;    // default: as Checkpoint::AddTensor decides
  // The device recorded as the shard's origin; default: block's device
  // (set it when the block is a host copy of device memory).
  std::optional<Device> origin;
};

// What one rank contributes to a collective save.
struct RankState {
  // Whole tensors, this rank's RNG records (saved as "rank<r>/<name>"), its
  // own tree (Tree(), saved as "ranks"[r]); rank 0's metadata is the file's.
  Checkpoint local;
  std::vector<ShardPart> shards;
  Value common_tree;  // read on rank 0 only
};

// Saves the state of every rank of `comm` into one file at `path`: the ranks
// agree on where each rank's chunks go (an exclusive scan of their aligned
// sizes), write them into one temporary file with MPI-IO, and rank 0 gathers
// the shard metadata and writes manifest and footer; every rank syncs the
// file, and rank 0 renames it over `path` only after every rank succeeded.
// Every rank returns the same result: on any rank's failure, every rank
// returns that error (prefixed "rank <r>: "), the temporary is removed, and
// a previous file at `path` is intact. Errors: InvalidArgument (bad options;
// blocks that overlap, leave a gap or disagree on a tensor's shape, dtype or
// section across ranks), IoError (a write, sync or rename failed on some
// rank, or options.progress cancelled), DeviceError. options.fs is not used
// (MPI-IO writes the file); options.progress is called with this rank's
// bytes while it encodes, and once more after its bytes are written.
Status SaveDistributed(MPI_Comm comm, const std::string& path, const RankState& state,
                       const SaveOptions& options = {});

// A block a rank wants: elements [offsets[d], offsets[d] + sizes[d]) of the
// tensor `name`. Empty offsets and sizes: the whole tensor.
struct BlockRequest {
  std::string name;
  Shape offsets;
  Shape sizes;
};

struct RankLoad {
  // One per request, in order: name, section, role, origin (of the tensor
  // as a whole), and the block, placed by the load options' policy.
  std::vector<TensorEntry> blocks;
  // The file's common tree, and every saved rank's own tree, by saved rank.
  Value common_tree;
  std::vector<Value> rank_trees;
  int saved_world_size = 0;
  // This rank's RNG records (names without the "rank<r>/" prefix), restored
  // to host memory, when the job has the saved world size. With another
  // world size they stay empty: a saved rank's generators do not belong to
  // any new rank, and all of them are in `saved_rng` for the job to decide.
  std::vector<RngRecord> rng;
  std::map<int, std::vector<RngRecord>> saved_rng;  // by saved rank
  uint64_t bytes_read = 0;    // tensor bytes this rank read from the file
  uint64_t bytes_needed = 0;  // raw bytes of the blocks it asked for
};

// Reads the blocks this rank wants from a file written by SaveDistributed
// (or any .rckpt file: unsharded tensors are one block), reading only the
// chunks that hold elements of them, and places each block as Load would
// place its tensor (map_location / model_device; sections do not apply).
// Every rank returns an error when any rank fails (prefixed "rank <r>: "):
// NotFound (no such file or tensor), InvalidArgument (a block outside its
// tensor), Corruption, Unsupported, DeviceUnavailable, DeviceError,
// OutOfMemory.
Result<RankLoad> LoadDistributed(MPI_Comm comm, const std::string& path,
                                 const std::vector<BlockRequest>& wants,
                                 const LoadOptions& options = {});

}  // namespace rckpt

#endif  // RCKPT_DISTRIBUTED_H_
