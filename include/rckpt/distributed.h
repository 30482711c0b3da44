// Sharded checkpoints for multi-process jobs: every rank of a job writes
// its part of the state into one .rckpt file in parallel, and a job of any
// size reads back the blocks each of its ranks wants. The ranks talk through
// a Communicator: MPI's (rckpt/mpi.h, library rckpt::mpi, built where MPI is
// found), torch.distributed's (filled by the Python package), or one of the
// caller's own.
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
// Thread-safety: the functions are collective: every rank of the
// communicator calls them, with the same path and options, from one thread
// at a time.
#ifndef RCKPT_DISTRIBUTED_H_
#define RCKPT_DISTRIBUTED_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rckpt/checkpoint.h"
#include "rckpt/options.h"

namespace rckpt {

// The collectives a sharded save and load need, over whatever connects the
// ranks of a job. Every rank of the job calls each collective in the same
// order. A collective that cannot complete returns an error instead of
// waiting forever: an implementation bounds each call by a timeout (a rank
// that died, or never came, is reported with the rank that noticed), after
// which the communicator need not be usable again. Implementations:
// MpiCommunicator (rckpt/mpi.h); the Python package's over torch.distributed
// process groups and mpi4py communicators.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank's `bytes`, by rank, on every rank.
  virtual Result<std::vector<std::string>> AllGather(std::string_view bytes) = 0;
  // `root`'s `bytes` on every rank (other ranks' `bytes` are ignored).
  virtual Result<std::string> Broadcast(int root, std::string_view bytes) = 0;
  // Every rank's `bytes`, by rank, on `root`; empty elsewhere. The default
  // gathers on every rank (AllGather).
  virtual Result<std::vector<std::string>> Gather(int root, std::string_view bytes);
  // Returns once every rank called it. The default: AllGather of nothing.
  virtual Status Barrier();
};

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
// sizes), write them into one temporary file (positioned writes, each rank
// into its own extent; MPI-IO through rckpt/mpi.h), and rank 0 gathers
// the shard metadata and writes manifest and footer; every rank syncs the
// file, and rank 0 renames it over `path` only after every rank succeeded.
// The ranks must see the same file system at `path` (one node, or a shared
// file system).
// An object-storage URL (s3://BUCKET/KEY) is one object written by one
// shared write (rckpt/file.h): rank 0 starts the multipart upload and hands
// its id to the others, every rank uploads its region as parts of its own
// (padded with zeros to at least S3's 5 MiB part), and rank 0 uploads
// manifest and footer as the last part and completes the upload; on any
// failure every rank that knows the upload aborts it (docs/DISTRIBUTED.md,
// "To object storage"). There options.fs is the file system used
// (DefaultFileSystem() when null). A rank lost after rank 0 completed the
// upload does not undo the save: rank 0 returns OK, and so does every rank
// that finds the object carrying the upload's marker.
// options.replace = false never replaces a file at `path` (AlreadyExists on
// every rank, nothing written): rank 0's rename does not replace, or the
// upload is completed with If-None-Match: *.
// Every rank returns the same result: on any rank's failure, every rank
// returns that error (prefixed "rank <r>: "), the temporary is removed, and
// a previous file at `path` is intact. Errors: InvalidArgument (bad options;
// blocks that overlap, leave a gap or disagree on a tensor's shape, dtype or
// section across ranks), IoError (a write, sync or rename failed on some
// rank, options.progress cancelled, or a collective failed or timed out),
// DeviceError. options.fs is not used for a local path (every rank writes
// the file directly);
// options.progress is called with this rank's bytes while it encodes, and
// once more after its bytes are written.
Status SaveDistributed(Communicator& comm, const std::string& path, const RankState& state,
                       const SaveOptions& options = {});

// A block a rank wants: elements [offsets[d], offsets[d] + sizes[d]) of the
// tensor `name`. Empty offsets and sizes: the whole tensor.
struct BlockRequest {
  std::string name;
  Shape offsets;
  Shape sizes;
  // Caller-owned memory to read the block into instead of a new tensor (as
  // a DCP storage reader fills the planner's tensors): the tensor's dtype
  // and the block's sizes, row-major, in host memory or on a device of
  // options.runtime; it stays valid until the load returns, and the
  // returned block borrows it. map_location / model_device do not apply to
  // it. A tensor may be asked for several times, in several blocks.
  std::optional<TensorView> into;
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
// place its tensor (map_location / model_device; sections do not apply), or
// into its request's `into`. With options.map_file (the default) raw chunks
// are checked and copied straight out of the mapped file; the returned
// blocks never alias it. Every rank returns an error when any rank fails
// (prefixed "rank <r>: "): NotFound (no such file or tensor),
// InvalidArgument (a block outside its tensor; an `into` of another dtype
// or shape), Corruption, Unsupported, DeviceUnavailable, DeviceError,
// OutOfMemory; IoError when a collective failed or timed out.
Result<RankLoad> LoadDistributed(Communicator& comm, const std::string& path,
                                 const std::vector<BlockRequest>& wants,
                                 const LoadOptions& options = {});

}  // namespace rckpt

#endif  // RCKPT_DISTRIBUTED_H_
