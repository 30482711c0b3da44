// A device load from object storage keeps its requests in flight whatever
// the staging ring's size: a worker fetches a chunk's stored bytes before it
// takes a slot, so the slots bound the copies in flight, not the requests.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "engine/engine_test_util.h"
#include "engine/pipeline.h"
#include "format/file_reader.h"
#include "test_runtime.h"

namespace rckpt {
namespace {

// A file that serves many reads at once, as an object store does, each
// taking a while; it counts how many were in flight at most.
class SlowObjectFile : public RandomAccessFile {
 public:
  explicit SlowObjectFile(std::unique_ptr<RandomAccessFile> inner) : inner_(std::move(inner)) {}
  uint64_t Size() const override { return inner_->Size(); }
  int ReadConcurrency() const override { return 16; }
  Status ReadAt(uint64_t offset, std::span<std::byte> dst) const override {
    const int now = ++in_flight_;
    int seen = most_.load();
    while (now > seen && !most_.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    Status s = inner_->ReadAt(offset, dst);
    --in_flight_;
    return s;
  }
  int most() const { return most_.load(); }
  void Reset() { most_ = 0; }

 private:
  std::unique_ptr<RandomAccessFile> inner_;
  mutable std::atomic<int> in_flight_{0};
  mutable std::atomic<int> most_{0};
};

TEST(ReadConcurrencyTest, RequestsInFlightAreNotBoundByTheStagingSlots) {
  MemFileSystem fs;
  Checkpoint saved;
  const Tensor w = testing::SmoothTensor(DType::kF32, {64, 4096}, 7);  // 1 MiB
  ASSERT_OK(saved.AddTensor("model", "w", w));
  ASSERT_OK(Save("/s.rckpt", saved, SaveOptions{.chunk_bytes = 16 << 10, .fs = &fs}));
  ASSERT_OK_AND_ASSIGN(auto inner, fs.OpenForRead("/s.rckpt"));
  auto file = std::make_unique<SlowObjectFile>(std::move(inner));
  SlowObjectFile* slow = file.get();
  ASSERT_OK_AND_ASSIGN(auto reader, FileReader::Open(std::move(file), "/s.rckpt"));
  const TensorMeta& meta = reader->manifest().tensors.at(0);
  ASSERT_EQ(meta.chunks.size(), 64u);
  slow->Reset();  // the reads that opened it

  auto rt = NewTestRuntime(1);
  const Device cuda0 = Device::Cuda(0);
  ASSERT_OK_AND_ASSIGN(void* device, rt->Allocate(cuda0, meta.nbytes));
  PipelineOptions o;
  o.runtime = rt.get();
  o.threads = 2;
  o.staging_bytes = 32 << 10;  // a ring of two 16 KiB slots
  PipelineStats stats;
  ASSERT_OK(RunLoadPipeline(*reader, {TensorDest{&meta, cuda0, device}}, o, &stats));
  EXPECT_EQ(stats.staging_capacity, 32u << 10);
  EXPECT_GE(slow->most(), 4) << "requests in flight stayed at the ring's two slots";

  std::vector<std::byte> back(meta.nbytes);
  ASSERT_OK_AND_ASSIGN(Stream s, rt->CreateStream(cuda0));
  ASSERT_OK(rt->CopyToHostAsync(cuda0, s, back.data(), device, meta.nbytes));
  ASSERT_OK(rt->Synchronize(cuda0, s));
  rt->DestroyStream(cuda0, s);
  EXPECT_TRUE(std::equal(back.begin(), back.end(), w.host_bytes().begin()));
  rt->Free(cuda0, device);
}

}  // namespace
}  // namespace rckpt
