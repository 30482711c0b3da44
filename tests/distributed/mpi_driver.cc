// The MPI side of the distributed tests: run by mpirun from
// distributed_test.cc, one scenario per invocation; every rank checks its
// own outcome and the job's exit status says whether all held.
//
//   rckpt-mpi-driver save DIR STEP CODEC   collective save of the job state
//   rckpt-mpi-driver load DIR STEP         resharded load by this world size
//   rckpt-mpi-driver kill DIR STEP CALL    rank 1 is SIGKILLed at its CALLth progress call
//   rckpt-mpi-driver fsize DIR STEP        rank 2 may not grow files (EFBIG): all get IoError
//   rckpt-mpi-driver overlap DIR           blocks that overlap: all get InvalidArgument
//   rckpt-mpi-driver hostile DIR           a file whose shards overlap: all get Corruption
#include <mpi.h>
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "distributed/mpi_state.h"
#include "format/file_reader.h"
#include "format/manifest.h"
#include "format/writer.h"
#include "rckpt/distributed.h"
#include "rckpt/io.h"
#include "rckpt/runtime.h"

namespace rckpt::testing {
namespace {

int g_rank = 0, g_size = 1;

int Fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: FAIL: %s\n", g_rank, what.c_str());
  return 1;
}

// This rank's part of the saving job (4 ranks) at `step`.
RankState StateOf(int rank, int step) {
  RankState s;
  for (const GlobalTensor& g : GlobalTensors()) {
    const Tensor global = GlobalValue(g);
    if (g.split_dim < 0) {
      (void)s.local.AddTensor(g.section, g.name, global);
      continue;
    }
    const Block b = PartOf(g.shape, g.split_dim, rank, kSavedRanks);
    s.shards.push_back(ShardPart{g.section, g.name, g.shape, b.offsets, Slice(global, b), {},
                                Device::Cuda(rank)});
  }
  (void)s.local.AddRng("cuda", RngKind::kTorchCuda, RankRngBytes(rank, step),
                       Device::Cuda(rank));
  s.local.Tree() = RankTree(rank, step);
  s.common_tree = CommonTree(step);
  s.local.Metadata()["job"] = "mpi-test";
  return s;
}

// What a single process would save for the same state: whole tensors,
// every rank's RNG records and trees as a collective save names them.
Checkpoint Assembled(int step) {
  Checkpoint ck;
  for (const GlobalTensor& g : GlobalTensors()) {
    (void)ck.AddTensor(g.section, g.name, GlobalValue(g));
  }
  Value& tree = ck.Tree();
  tree["common"] = CommonTree(step);
  tree["ranks"] = Value::List({});
  for (int r = 0; r < kSavedRanks; ++r) {
    (void)ck.AddRng("rank" + std::to_string(r) + "/cuda", RngKind::kTorchCuda,
                    RankRngBytes(r, step), Device::Cuda(r));
    tree["ranks"].Append(RankTree(r, step));
  }
  ck.Metadata()["job"] = "mpi-test";
  ck.Metadata()["rckpt.world_size"] = std::to_string(kSavedRanks);
  return ck;
}

int Save(const std::string& dir, int step, const std::string& codec) {
  SaveOptions o;
  o.codec = codec == "zstd" ? Codec::kZstd : Codec::kNone;
  o.chunk_bytes = 4096;
  o.threads = 1;
  Status s = SaveDistributed(MPI_COMM_WORLD, dir + "/ck.rckpt", StateOf(g_rank, step), o);
  if (!s.ok()) return Fail(s.ToString());
  if (g_rank == 0) {
    s = rckpt::Save(dir + "/assembled-" + std::to_string(step) + ".rckpt", Assembled(step), o);
    if (!s.ok()) return Fail(s.ToString());
  }
  return 0;
}

// The sharding a loading job of `n` ranks uses: different from the saved
// one wherever the shape allows.
Block WantedBlock(const GlobalTensor& g, int rank, int n) {
  if (g.split_dim < 0) return WholeBlock(g.shape);
  const int dim = g.shape.size() == 2 ? 1 - g.split_dim : 0;
  return PartOf(g.shape, dim, rank, n);
}

int Load(const std::string& dir, int step) {
  std::vector<BlockRequest> wants;
  for (const GlobalTensor& g : GlobalTensors()) {
    const Block b = WantedBlock(g, g_rank, g_size);
    wants.push_back(BlockRequest{g.name, b.offsets, b.sizes});
  }
  // Each rank's model side goes to its own (host-emulated) GPU, everything
  // else to host memory, as model_device places it.
  std::unique_ptr<DeviceRuntime> gpus = NewEmulatedRuntime(g_size);
  LoadOptions o;
  o.threads = 1;
  o.runtime = gpus.get();
  o.model_device = DeviceSpec::Of(Device::Cuda(g_rank));
  Result<RankLoad> r = LoadDistributed(MPI_COMM_WORLD, dir + "/ck.rckpt", wants, o);
  if (!r.ok()) return Fail(r.status().ToString());
  const std::vector<GlobalTensor> globals = GlobalTensors();
  for (size_t i = 0; i < globals.size(); ++i) {
    const Tensor want = Slice(GlobalValue(globals[i]), WantedBlock(globals[i], g_rank, g_size));
    const Tensor& got = r->blocks[i].tensor;
    const bool model_side = r->blocks[i].role == Role::kModel;
    if (got.device() != (model_side ? Device::Cuda(g_rank) : Device::Cpu())) {
      return Fail("'" + globals[i].name + "' was placed on " + got.device().ToString());
    }
    std::vector<std::byte> bytes(got.nbytes());
    if (got.device().is_cpu()) {
      std::memcpy(bytes.data(), got.data(), bytes.size());
    } else {
      Stream stream = *gpus->CreateStream(got.device());
      Status s = gpus->CopyToHostAsync(got.device(), stream, bytes.data(), got.data(), bytes.size());
      if (s.ok()) s = gpus->Synchronize(got.device(), stream);
      gpus->DestroyStream(got.device(), stream);
      if (!s.ok()) return Fail(s.ToString());
    }
    if (got.shape() != want.shape() || got.dtype() != want.dtype() ||
        std::memcmp(bytes.data(), want.data(), want.nbytes()) != 0) {
      return Fail("block of '" + globals[i].name + "' differs from the global tensor's slice");
    }
  }
  if (!(r->common_tree == CommonTree(step))) return Fail("common tree");
  if (r->saved_world_size != kSavedRanks || r->rank_trees.size() != kSavedRanks) {
    return Fail("saved world size " + std::to_string(r->saved_world_size));
  }
  for (int s = 0; s < kSavedRanks; ++s) {
    if (!(r->rank_trees[s] == RankTree(s, step))) return Fail("tree of rank " + std::to_string(s));
    const auto& rng = r->saved_rng[s];
    if (rng.size() != 1 || rng[0].name != "cuda" || rng[0].bytes != RankRngBytes(s, step)) {
      return Fail("RNG records of saved rank " + std::to_string(s));
    }
  }
  const bool same_world = g_size == kSavedRanks;
  if (same_world != !r->rng.empty() ||
      (same_world && r->rng[0].bytes != RankRngBytes(g_rank, step))) {
    return Fail("own RNG records with world size " + std::to_string(g_size));
  }
  std::printf("rank %d of %d: bytes_read %llu bytes_needed %llu\n", g_rank, g_size,
              static_cast<unsigned long long>(r->bytes_read),
              static_cast<unsigned long long>(r->bytes_needed));
  return 0;
}

int Kill(const std::string& dir, int step, int call) {
  SaveOptions o;
  o.chunk_bytes = 4096;
  o.threads = 1;
  int calls = 0;
  if (g_rank == 1) {
    o.progress = [&](uint64_t, uint64_t) {
      if (++calls == call) std::raise(SIGKILL);
      return true;
    };
  }
  Status s = SaveDistributed(MPI_COMM_WORLD, dir + "/ck.rckpt", StateOf(g_rank, step), o);
  return Fail("the save returned " + s.ToString() + " instead of being killed");
}

int FileSizeLimit(const std::string& dir, int step) {
  if (g_rank == 2) {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{16 << 10, 16 << 10};
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  SaveOptions o;
  o.chunk_bytes = 4096;
  Status s = SaveDistributed(MPI_COMM_WORLD, dir + "/ck.rckpt", StateOf(g_rank, step), o);
  if (s.code() != StatusCode::kIoError || s.message().find("rank 2:") == std::string::npos) {
    return Fail("expected IoError from rank 2, got " + s.ToString());
  }
  return 0;
}

int Overlap(const std::string& dir) {
  RankState s = StateOf(g_rank, 0);
  s.shards[0].offsets[0] = g_rank * 20;  // blocks of 24 rows every 20: overlap
  Status st = SaveDistributed(MPI_COMM_WORLD, dir + "/overlap.rckpt", s, {});
  if (st.code() != StatusCode::kInvalidArgument || st.message().find("overlap") == std::string::npos) {
    return Fail("expected InvalidArgument naming the overlap, got " + st.ToString());
  }
  return 0;
}

// A copy of DIR/ck.rckpt whose fc1 shards 1 and 2 overlap (and so leave a
// gap), manifest and footer rebuilt to match: only the validator can tell.
Status WriteHostile(const std::string& dir) {
  RCKPT_ASSIGN_OR_RETURN(auto reader, FileReader::Open(PosixFileSystem(), dir + "/ck.rckpt"));
  Manifest m = reader->manifest();
  for (TensorMeta& t : m.tensors) {
    if (t.name == "fc1.weight") t.shards[2].offsets = t.shards[1].offsets;
  }
  RCKPT_ASSIGN_OR_RETURN(FlatTree tree, EncodeTree(m.tree));
  const std::vector<uint8_t> manifest = BuildManifestFromMeta(m, tree);
  std::vector<std::byte> head(m.data_end);
  RCKPT_RETURN_IF_ERROR(reader->file().ReadAt(0, head));
  RCKPT_ASSIGN_OR_RETURN(auto out, PosixFileSystem().OpenForWrite(dir + "/hostile.rckpt"));
  RCKPT_RETURN_IF_ERROR(out->Append(head));
  RCKPT_RETURN_IF_ERROR(AppendManifestAndFooter(*out, m.data_end, manifest, m.version_minor));
  return out->Close();
}

int Hostile(const std::string& dir) {
  if (g_rank == 0) {
    Status s = WriteHostile(dir);
    if (!s.ok()) return Fail(s.ToString());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  Result<RankLoad> r =
      LoadDistributed(MPI_COMM_WORLD, dir + "/hostile.rckpt", {BlockRequest{"step", {}, {}}});
  if (r.status().code() != StatusCode::kCorruption ||
      r.status().message().find("overlap") == std::string::npos) {
    return Fail("expected Corruption naming the overlap, got " + r.status().ToString());
  }
  return 0;
}

int Run(int argc, char** argv) {
  if (argc < 3) return Fail("usage: rckpt-mpi-driver MODE DIR [ARGS]");
  const std::string mode = argv[1], dir = argv[2];
  auto arg = [&](int i) { return i < argc ? std::atoi(argv[i]) : 0; };
  if (mode == "save") return Save(dir, arg(3), argc > 4 ? argv[4] : "none");
  if (mode == "load") return Load(dir, arg(3));
  if (mode == "kill") return Kill(dir, arg(3), arg(4));
  if (mode == "fsize") return FileSizeLimit(dir, arg(3));
  if (mode == "overlap") return Overlap(dir);
  if (mode == "hostile") return Hostile(dir);
  return Fail("unknown mode " + mode);
}

}  // namespace
}  // namespace rckpt::testing

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rckpt::testing::g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &rckpt::testing::g_size);
  const int rc = rckpt::testing::Run(argc, argv);
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
