// Collective saves and loads over the Communicator interface, without MPI:
// the ranks are threads of this process, joined by an in-process
// communicator, and the file is written with positioned writes (the path
// the Python package's torch.distributed and mpi4py communicators take).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "distributed/collective.h"
#include "distributed/save.h"
#include "distributed/shared_file.h"
#include "io/mem_file.h"
#include "mpi_state.h"
#include "rckpt/distributed.h"
#include "rckpt/io.h"
#include "test_util.h"
#include "thread_communicator.h"

namespace rckpt::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The state rank `rank` of `world` saves: every global tensor split by rows
// (or replicated), its RNG record and its own tree.
RankState StateOf(int rank, int world) {
  RankState s;
  for (const GlobalTensor& g : GlobalTensors()) {
    const Tensor global = GlobalValue(g);
    if (g.split_dim < 0) {
      EXPECT_TRUE(s.local.AddTensor(g.section, g.name, global).ok());
      continue;
    }
    const Block b = PartOf(g.shape, g.split_dim, rank, world);
    s.shards.push_back(ShardPart{g.section, g.name, g.shape, b.offsets, Slice(global, b), {}, {}});
  }
  EXPECT_TRUE(s.local.AddRng("cuda", RngKind::kTorchCuda, RankRngBytes(rank, 1)).ok());
  s.local.Tree() = RankTree(rank, 1);
  s.common_tree = CommonTree(1);
  return s;
}

std::string Bytes(const Tensor& t) {
  auto b = t.host_bytes();
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

std::string FileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Saves the test's state from `ranks` ranks to `path`; a failure on any
// rank fails the test.
void SaveOnRanks(const std::string& path, int ranks) {
  for (const Status& s : OnRanks<Status>(ranks, [&](Communicator& comm) {
         return SaveDistributed(comm, path, StateOf(comm.rank(), ranks));
       })) {
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
}

class CommunicatorSaveTest : public ::testing::TestWithParam<Codec> {};

TEST_P(CommunicatorSaveTest, SavedOnThreeRanksLoadsReshardedOnTwoAndWholeInOneProcess) {
  const std::string path = NewTempDir("comm") + "/ck.rckpt";
  SaveOptions o;
  o.codec = GetParam();
  o.chunk_bytes = 4096;
  const std::vector<Status> saved = OnRanks<Status>(3, [&](Communicator& comm) {
    return SaveDistributed(comm, path, StateOf(comm.rank(), comm.size()), o);
  });
  for (const Status& s : saved) ASSERT_TRUE(s.ok()) << s.ToString();

  // Two ranks, each half of every tensor along its first dimension.
  const auto loaded = OnRanks<Result<RankLoad>>(2, [&](Communicator& comm) {
    std::vector<BlockRequest> wants;
    for (const GlobalTensor& g : GlobalTensors()) {
      if (g.shape.empty()) {
        wants.push_back({g.name, {}, {}});
      } else {
        const Block b = PartOf(g.shape, 0, comm.rank(), comm.size());
        wants.push_back({g.name, b.offsets, b.sizes});
      }
    }
    return LoadDistributed(comm, path, wants);
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(loaded[r].ok()) << loaded[r].status().ToString();
    const RankLoad& back = *loaded[r];
    EXPECT_EQ(back.saved_world_size, 3);
    EXPECT_TRUE(back.rng.empty()) << "another world size: no own RNG";
    ASSERT_EQ(back.saved_rng.size(), 3u);
    size_t k = 0;
    for (const GlobalTensor& g : GlobalTensors()) {
      const Tensor global = GlobalValue(g);
      const Tensor expected =
          g.shape.empty() ? global : Slice(global, PartOf(g.shape, 0, r, 2));
      EXPECT_EQ(Bytes(back.blocks[k].tensor), Bytes(expected)) << g.name << " on rank " << r;
      ++k;
    }
  }
  // One process: whole tensors.
  Result<Checkpoint> whole = Load(path);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  for (const GlobalTensor& g : GlobalTensors()) {
    const TensorEntry* e = whole->FindTensor(g.name);
    ASSERT_NE(e, nullptr) << g.name;
    EXPECT_EQ(Bytes(e->tensor), Bytes(GlobalValue(g))) << g.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, CommunicatorSaveTest,
                         ::testing::Values(Codec::kNone, Codec::kZstd));

TEST(CommunicatorSaveTest, AnErrorOnOneRankIsEveryRanksAndKeepsThePreviousFile) {
  const std::string dir = NewTempDir("comm-err");
  const std::string path = dir + "/ck.rckpt";
  ASSERT_NO_FATAL_FAILURE(SaveOnRanks(path, 2));
  const std::string before = FileBytes(path);
  // Rank 1's block of fc1 starts one row early: it overlaps rank 0's.
  const std::vector<Status> failed = OnRanks<Status>(2, [&](Communicator& comm) {
    RankState s = StateOf(comm.rank(), 2);
    if (comm.rank() == 1) s.shards[0].offsets[0] -= 1;
    return SaveDistributed(comm, path, s);
  });
  EXPECT_EQ(failed[0].code(), StatusCode::kInvalidArgument) << failed[0].ToString();
  EXPECT_EQ(failed[0].ToString(), failed[1].ToString());
  EXPECT_EQ(FileBytes(path), before);
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos)
        << entry.path();
  }
}

// SaveOptions::replace = false: the rename never replaces a file at the
// path; every rank returns AlreadyExists, the first file stays, no
// temporary is left.
TEST(CommunicatorSaveTest, ASaveThatMustNotReplaceFindsThePathTakenOnEveryRank) {
  const std::string dir = NewTempDir("comm-create");
  const std::string path = dir + "/ck.rckpt";
  const auto create = [&] {
    return OnRanks<Status>(2, [&](Communicator& comm) {
      SaveOptions o;
      o.replace = false;
      return SaveDistributed(comm, path, StateOf(comm.rank(), 2), o);
    });
  };
  for (const Status& s : create()) ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string before = FileBytes(path);
  for (const Status& s : create()) {
    EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
  }
  EXPECT_EQ(FileBytes(path), before);
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos)
        << entry.path();
  }
}

TEST(CommunicatorSaveTest, ARankThatNeverComesMakesTheOthersFailInsteadOfWaiting) {
  const std::string dir = NewTempDir("comm-vanish");
  const std::string path = dir + "/ck.rckpt";
  const std::vector<Status> out = OnRanks<Status>(
      3,
      [&](Communicator& comm) {
        if (comm.rank() == 2) return Status::Ok();  // never enters the save
        return SaveDistributed(comm, path, StateOf(comm.rank(), 3));
      },
      300ms);
  for (int r : {0, 1}) {
    EXPECT_EQ(out[r].code(), StatusCode::kIoError) << out[r].ToString();
    EXPECT_NE(out[r].message().find("rank " + std::to_string(r) + ": "), std::string::npos)
        << out[r].ToString();
  }
  EXPECT_FALSE(fs::exists(path));
}

int CollectivesOf(Communicator& comm) { return dynamic_cast<ThreadCommunicator&>(comm).collectives(); }

TEST(CommunicatorSaveTest, ASaveCostsFiveCollectivesAndALoadOne) {
  // Each collective is a round trip through the process group (two for an
  // allgather over torch.distributed): each step of the save exchanges what
  // the next needs together with every rank's outcome.
  const std::string path = NewTempDir("comm-count") + "/ck.rckpt";
  for (SaveOptions o : {SaveOptions{}, SaveOptions{.codec = Codec::kZstd}}) {
    const std::vector<int> counts = OnRanks<int>(3, [&](Communicator& comm) {
      const Status s = SaveDistributed(comm, path, StateOf(comm.rank(), 3), o);
      EXPECT_TRUE(s.ok()) << s.ToString();
      return CollectivesOf(comm);
    });
    for (int c : counts) EXPECT_EQ(c, 5) << CodecName(o.codec);
  }
  const std::vector<int> loads = OnRanks<int>(2, [&](Communicator& comm) {
    EXPECT_TRUE(LoadDistributed(comm, path, {{"fc1.weight", {}, {}}}).ok());
    return CollectivesOf(comm);
  });
  for (int c : loads) EXPECT_EQ(c, 1);
}

// A file whose every write fails when `fail` is set (a full disk on one rank).
class FailingWrites : public SharedFile {
 public:
  FailingWrites(std::unique_ptr<SharedFile> file, bool fail) : file_(std::move(file)), fail_(fail) {}
  Status WriteAt(uint64_t offset, std::span<const std::byte> data) override {
    if (fail_) return Status::IoError("write at offset " + std::to_string(offset) + ": no space");
    return file_->WriteAt(offset, data);
  }
  Status SyncAndClose() override { return file_->SyncAndClose(); }

 private:
  std::unique_ptr<SharedFile> file_;
  bool fail_;
};

TEST(CommunicatorSaveTest, AFailedOpenOrWriteOnOneRankIsEveryRanksErrorAndKeepsThePreviousFile) {
  const std::string dir = NewTempDir("comm-open");
  const std::string path = dir + "/ck.rckpt";
  ASSERT_NO_FATAL_FAILURE(SaveOnRanks(path, 3));
  const std::string before = FileBytes(path);
  const SharedFileOpener no_open = [](Communicator& comm, const std::string& tmp)
      -> Result<std::unique_ptr<SharedFile>> {
    if (comm.rank() == 1) return Status::IoError("open '" + tmp + "': permission denied");
    return PositionedFileOpener(PosixFileSystem())(comm, tmp);
  };
  const SharedFileOpener no_write = [](Communicator& comm, const std::string& tmp)
      -> Result<std::unique_ptr<SharedFile>> {
    RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<SharedFile> f, PositionedFileOpener(PosixFileSystem())(comm, tmp));
    return std::unique_ptr<SharedFile>(std::make_unique<FailingWrites>(std::move(f), comm.rank() == 2));
  };
  for (const auto& [opener, rank, what] :
       {std::tuple{no_open, 1, "permission denied"}, std::tuple{no_write, 2, "no space"}}) {
    const std::vector<Status> out = OnRanks<Status>(
        3,
        [&](Communicator& comm) {
          return SaveDistributedTo(comm, opener, path, StateOf(comm.rank(), 3), {});
        },
        10s);
    for (const Status& s : out) {
      EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
      EXPECT_NE(s.message().find("rank " + std::to_string(rank) + ": "), std::string::npos)
          << s.ToString();
      EXPECT_NE(s.message().find(what), std::string::npos) << s.ToString();
      EXPECT_EQ(s.ToString(), out[0].ToString());
    }
    EXPECT_EQ(FileBytes(path), before);
    for (const auto& entry : fs::directory_iterator(dir)) {
      EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos)
          << entry.path();
    }
  }
}

TEST(CommunicatorLoadTest, BlocksAreReadIntoTheCallersMemoryAsOftenAsAsked) {
  const std::string path = NewTempDir("comm-into") + "/ck.rckpt";
  ASSERT_NO_FATAL_FAILURE(SaveOnRanks(path, 3));
  const GlobalTensor fc1 = GlobalTensors()[0];  // f32 [96, 40], saved by rows
  const Tensor global = GlobalValue(fc1);
  // Two column halves of fc1 (each crosses all three saved shards), one into
  // the caller's memory, one as a new block; a whole tensor into memory too.
  const Block left = PartOf(fc1.shape, 1, 0, 2), right = PartOf(fc1.shape, 1, 1, 2);
  for (bool map_file : {true, false}) {
    Tensor into_left = *Tensor::Zeros(DType::kF32, left.sizes);
    Tensor into_right = *Tensor::Zeros(DType::kF32, right.sizes);
    Tensor into_step = *Tensor::Zeros(DType::kI64, {});
    const std::vector<BlockRequest> wants = {
        {fc1.name, left.offsets, left.sizes, into_left.view()},
        {fc1.name, right.offsets, right.sizes, into_right.view()},
        {fc1.name, right.offsets, right.sizes, std::nullopt},
        {GlobalTensors()[5].name, {}, {}, into_step.view()},
    };
    LoadOptions o;
    o.map_file = map_file;
    const auto out = OnRanks<Result<RankLoad>>(
        1, [&](Communicator& comm) { return LoadDistributed(comm, path, wants, o); });
    ASSERT_TRUE(out[0].ok()) << out[0].status().ToString();
    const RankLoad& back = *out[0];
    ASSERT_EQ(back.blocks.size(), 4u);
    EXPECT_EQ(Bytes(into_left), Bytes(Slice(global, left))) << "map_file " << map_file;
    EXPECT_EQ(Bytes(into_right), Bytes(Slice(global, right)));
    EXPECT_EQ(Bytes(back.blocks[2].tensor), Bytes(Slice(global, right)));
    EXPECT_EQ(Bytes(into_step), Bytes(GlobalValue(GlobalTensors()[5])));
    EXPECT_EQ(back.blocks[0].tensor.data(), into_left.data()) << "the block borrows the memory";
    EXPECT_EQ(back.blocks[3].tensor.data(), into_step.data());
    EXPECT_NE(back.blocks[2].tensor.data(), into_right.data());
    EXPECT_EQ(back.bytes_needed, into_left.nbytes() + 2 * into_right.nbytes() + 8);
  }
}

TEST(CommunicatorLoadTest, MemoryOfAnotherDtypeOrShapeIsRefusedBeforeAnyRead) {
  const std::string path = NewTempDir("comm-into-bad") + "/ck.rckpt";
  ASSERT_NO_FATAL_FAILURE(SaveOnRanks(path, 2));
  Tensor f64 = *Tensor::Zeros(DType::kF64, {96, 40});
  Tensor small = *Tensor::Zeros(DType::kF32, {96, 39});
  Tensor device = *Tensor::Zeros(DType::kF32, {96, 40});
  TensorView on_gpu = device.view();
  on_gpu.device = Device::Cuda(3);
  for (const auto& [into, code, says] :
       {std::tuple{f64.view(), StatusCode::kInvalidArgument, "has dtype f64, the tensor f32"},
        std::tuple{small.view(), StatusCode::kInvalidArgument, "has shape [96, 39], the block [96, 40]"},
        std::tuple{on_gpu, StatusCode::kDeviceUnavailable, "is on cuda:3"}}) {
    const auto out = OnRanks<Result<RankLoad>>(2, [&](Communicator& comm) {
      return LoadDistributed(comm, path, {{"fc1.weight", {}, {}, into}});
    });
    for (const auto& r : out) {
      EXPECT_EQ(r.status().code(), code) << r.status().ToString();
      EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().ToString();
      EXPECT_NE(r.status().message().find("'fc1.weight'"), std::string::npos);
    }
  }
}

TEST(AgreeTest, EveryRankGetsTheLowestFailingRanksErrorPrefixedWithItsRank) {
  const std::vector<Status> out = OnRanks<Status>(3, [](Communicator& comm) {
    Status mine;
    if (comm.rank() == 1) mine = Status::NotFound("no such tensor");
    if (comm.rank() == 2) mine = Status::IoError("disk full");
    return Agree(comm, mine);
  });
  for (const Status& s : out) {
    EXPECT_EQ(s.code(), StatusCode::kNotFound);
    EXPECT_EQ(s.message(), "rank 1: no such tensor");
  }
  const std::vector<Status> fine =
      OnRanks<Status>(2, [](Communicator& comm) { return Agree(comm, Status::Ok()); });
  for (const Status& s : fine) EXPECT_TRUE(s.ok());
}

TEST(CommunicatorTest, DefaultGatherAndBarrierGoThroughAllGather) {
  const auto out = OnRanks<std::vector<std::string>>(3, [](Communicator& comm) {
    EXPECT_TRUE(comm.Barrier().ok());
    Result<std::vector<std::string>> g =
        comm.Gather(1, testing::Numbered("r", comm.rank()));
    EXPECT_TRUE(g.ok());
    return g.ok() ? *g : std::vector<std::string>{"error"};
  });
  EXPECT_TRUE(out[0].empty());
  EXPECT_EQ(out[1], (std::vector<std::string>{"r0", "r1", "r2"}));
  EXPECT_TRUE(out[2].empty());
}

}  // namespace
}  // namespace rckpt::testing

namespace rckpt::testing {
namespace {

// The whole tensors of the checkpoint at `path` in `fs`, compared with the
// state the test saves.
void ExpectWholeStateIn(FileSystem& fs, const std::string& path) {
  LoadOptions lo;
  lo.fs = &fs;
  Result<Checkpoint> whole = Load(path, lo);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  for (const GlobalTensor& g : GlobalTensors()) {
    const TensorEntry* e = whole->FindTensor(g.name);
    ASSERT_NE(e, nullptr) << g.name;
    EXPECT_EQ(Bytes(e->tensor), Bytes(GlobalValue(g))) << g.name;
  }
}

// SaveOptions::fs reaches the collective save's files (the temporary, the
// ranks' positioned writes, the spill files, the rename): a save into the
// in-memory file system lands there, and a fault injected into it, a full
// disk or a failing sync, is every rank's error and leaves the previous
// checkpoint whole, with no temporary or spill file behind.
TEST(CommunicatorSaveTest, ASaveGoesThroughTheConfiguredFileSystemAndItsFaultsReachEveryRank) {
  MemFileSystem mem;
  const std::string dir = "/ckpt";
  const std::string path = dir + "/ck.rckpt";
  const auto save = [&](Codec codec) {
    return OnRanks<Status>(
        3,
        [&](Communicator& comm) {
          SaveOptions o;
          o.fs = &mem;
          o.codec = codec;
          o.chunk_bytes = 4096;
          return SaveDistributed(comm, path, StateOf(comm.rank(), 3), o);
        },
        10s);
  };
  for (const Status& s : save(Codec::kNone)) ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_NE(mem.GetFile(path), nullptr);
  ASSERT_NO_FATAL_FAILURE(ExpectWholeStateIn(mem, path));
  const std::vector<std::byte> before = *mem.GetFile(path);

  struct Case {
    const char* what;
    MemFileSystem::Faults faults;
    Codec codec;
  };
  for (const Case& c : {Case{"No space left on device", {.fail_write_after_bytes = 3000}, Codec::kNone},
                        Case{"No space left on device", {.fail_write_after_bytes = 3000}, Codec::kZstd},
                        Case{"Input/output error", {.fail_sync = true}, Codec::kNone}}) {
    SCOPED_TRACE(std::string(c.what) + ", " + std::string(CodecName(c.codec)));
    mem.SetFaults(c.faults);
    const std::vector<Status> out = save(c.codec);
    mem.SetFaults({});
    for (const Status& s : out) {
      EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
      EXPECT_NE(s.message().find(c.what), std::string::npos) << s.ToString();
      EXPECT_EQ(s.ToString(), out[0].ToString());
    }
    ASSERT_NE(mem.GetFile(path), nullptr);
    EXPECT_EQ(*mem.GetFile(path), before);
    Result<std::vector<std::string>> names = mem.ListDir(dir);
    ASSERT_TRUE(names.ok()) << names.status().ToString();
    EXPECT_EQ(*names, std::vector<std::string>{"ck.rckpt"});
  }
  ASSERT_NO_FATAL_FAILURE(ExpectWholeStateIn(mem, path));
}

}  // namespace
}  // namespace rckpt::testing
