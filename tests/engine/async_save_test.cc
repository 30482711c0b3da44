// AsyncSaver: the file holds the state at the call, one save in flight,
// errors reported exactly once, device tensors through pinned copies.
#include "rckpt/async_save.h"

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "rckpt/checkpoint.h"
#include "rckpt/file.h"
#include "rckpt/io.h"
#include "rckpt/runtime.h"
#include "runtime/emulated_runtime.h"
#include "test_runtime.h"
#include "test_util.h"

namespace rckpt {
namespace {

using ::testing::HasSubstr;

// Host tensors the test owns and mutates, added to the checkpoint as views.
struct State {
  std::vector<float> weight = std::vector<float>(300000);
  std::vector<int64_t> step = std::vector<int64_t>(1);
  Checkpoint ck;

  State() {
    for (size_t i = 0; i < weight.size(); ++i) weight[i] = static_cast<float>(i) * 0.5f;
    step[0] = 7;
    EXPECT_OK(ck.AddTensor("model", "model.weight",
                           TensorView{weight.data(), DType::kF32,
                                      {static_cast<int64_t>(weight.size())}, Device::Cpu()}));
    EXPECT_OK(ck.AddTensor("optimizer", "optimizer.step",
                           TensorView{step.data(), DType::kI64, {}, Device::Cpu()}));
    ck.Tree()["controller"]["epoch"] = 3;
    ck.Metadata()["run"] = "a";
  }

  // What a training step does to every part of the state.
  void Mutate() {
    for (float& w : weight) w += 1.0f;
    step[0] += 1;
    ck.Tree()["controller"]["epoch"] = 4;
    ck.Metadata()["run"] = "b";
  }
};

SaveOptions On(MemFileSystem* fs) {
  SaveOptions o;
  o.fs = fs;
  o.chunk_bytes = 64 << 10;  // several chunks, so progress runs several times
  return o;
}

Checkpoint LoadFrom(MemFileSystem* fs, const std::string& path) {
  LoadOptions o;
  o.fs = fs;
  o.model_device = DeviceSpec::Of(Device::Cpu());  // tensors saved from emulated devices too
  Result<Checkpoint> ck = Load(path, o);
  EXPECT_TRUE(ck.ok()) << ck.status().ToString();
  return ck.ok() ? std::move(*ck) : Checkpoint();
}

std::vector<float> Floats(const Checkpoint& ck, const std::string& name) {
  const TensorEntry* e = ck.FindTensor(name);
  if (e == nullptr) return {};
  std::span<const float> s = e->tensor.host_span<float>();
  return {s.begin(), s.end()};
}

TEST(AsyncSaverTest, FileHoldsTheStateAtTheCallWhateverChangesAfter) {
  MemFileSystem fs;
  AsyncSaver saver;
  State state;
  const std::vector<float> at_call = state.weight;
  ASSERT_OK(saver.Save("ck.rckpt", state.ck, On(&fs)));
  state.Mutate();
  ASSERT_OK(saver.Wait());

  Checkpoint back = LoadFrom(&fs, "ck.rckpt");
  EXPECT_EQ(Floats(back, "model.weight"), at_call);
  EXPECT_EQ(back.FindTensor("optimizer.step")->tensor.host_span<int64_t>()[0], 7);
  EXPECT_EQ(back.Tree().Find("controller")->Find("epoch")->as_int(), 3);
  EXPECT_EQ(back.Metadata().at("run"), "a");
}

TEST(AsyncSaverTest, FreeingTheTensorsRightAfterTheCallIsSafe) {
  MemFileSystem fs;
  AsyncSaver saver;
  std::vector<float> expected;
  {
    State state;
    expected = state.weight;
    ASSERT_OK(saver.Save("ck.rckpt", state.ck, On(&fs)));
    std::fill(state.weight.begin(), state.weight.end(), -1.0f);
  }  // the tensors are gone before the persist may even have started
  ASSERT_OK(saver.Wait());
  EXPECT_EQ(Floats(LoadFrom(&fs, "ck.rckpt"), "model.weight"), expected);
}

TEST(AsyncSaverTest, SnapshotBuffersAreKeptAndReusedFromSaveToSave) {
  MemFileSystem fs;
  AsyncSaver saver;
  State state;
  ASSERT_OK(saver.Save("a.rckpt", state.ck, On(&fs)));
  const AsyncSaveStats first = saver.stats();
  EXPECT_EQ(first.snapshot_bytes, state.ck.TensorBytes());
  EXPECT_GE(first.snapshot_capacity, state.ck.TensorBytes());
  EXPECT_LT(first.snapshot_capacity, state.ck.TensorBytes() + (64 << 10));
  for (int i = 0; i < 5; ++i) {
    state.Mutate();
    ASSERT_OK(saver.Save("a.rckpt", state.ck, On(&fs)));
    EXPECT_EQ(saver.stats().snapshot_capacity, first.snapshot_capacity);
  }
  ASSERT_OK(saver.Wait());
  EXPECT_EQ(saver.stats().saves, 6u);
  EXPECT_EQ(Floats(LoadFrom(&fs, "a.rckpt"), "model.weight"), state.weight);

  // A larger state grows the buffers.
  std::vector<float> more(500000, 2.0f);
  ASSERT_OK(state.ck.AddTensor(
      "model", "model.more",
      TensorView{more.data(), DType::kF32, {static_cast<int64_t>(more.size())}, Device::Cpu()}));
  ASSERT_OK(saver.Save("a.rckpt", state.ck, On(&fs)));
  EXPECT_GE(saver.stats().snapshot_capacity, state.ck.TensorBytes());
  ASSERT_OK(saver.Wait());
  EXPECT_EQ(Floats(LoadFrom(&fs, "a.rckpt"), "model.more"), more);
}

TEST(AsyncSaverTest, ASecondSaveStartsOnlyOnceTheFirstIsDurable) {
  MemFileSystem fs;
  AsyncSaver saver;
  State state;
  const std::vector<float> first = state.weight;
  ASSERT_OK(saver.Save("first.rckpt", state.ck, On(&fs)));
  state.Mutate();
  ASSERT_OK(saver.Save("second.rckpt", state.ck, On(&fs)));
  // The second Save waited for the first: its file is complete already.
  EXPECT_NE(fs.GetFile("first.rckpt"), nullptr);
  EXPECT_EQ(Floats(LoadFrom(&fs, "first.rckpt"), "model.weight"), first);
  ASSERT_OK(saver.Wait());
  EXPECT_EQ(Floats(LoadFrom(&fs, "second.rckpt"), "model.weight"), state.weight);
}

TEST(AsyncSaverTest, SavesFromTwoThreadsAreSerialised) {
  MemFileSystem fs;
  AsyncSaver saver;
  State a, b;
  b.Mutate();
  std::thread other([&] { EXPECT_OK(saver.Save("b.rckpt", b.ck, On(&fs))); });
  ASSERT_OK(saver.Save("a.rckpt", a.ck, On(&fs)));
  other.join();
  ASSERT_OK(saver.Wait());
  EXPECT_EQ(Floats(LoadFrom(&fs, "a.rckpt"), "model.weight"), a.weight);
  EXPECT_EQ(Floats(LoadFrom(&fs, "b.rckpt"), "model.weight"), b.weight);
}

TEST(AsyncSaverTest, BackgroundErrorComesFromWaitWithPathAndCauseAndOldFileSurvives) {
  MemFileSystem fs;
  State state;
  ASSERT_OK(Save("ck.rckpt", state.ck, On(&fs)));
  const std::vector<std::byte> old = *fs.GetFile("ck.rckpt");
  fs.SetFaults({.fail_write_after_bytes = 100000});
  AsyncSaver saver;
  state.Mutate();
  ASSERT_OK(saver.Save("ck.rckpt", state.ck, On(&fs)));
  EXPECT_THAT(saver.Wait(), StatusIs(StatusCode::kIoError, "No space left on device"));
  EXPECT_EQ(*fs.GetFile("ck.rckpt"), old);
  // Reported once: a second Wait has nothing to say.
  EXPECT_OK(saver.Wait());
}

TEST(AsyncSaverTest, BackgroundErrorComesFromTheNextSaveWhichStartsNothing) {
  MemFileSystem fs;
  State state;
  AsyncSaver saver;
  fs.SetFaults({.fail_rename = true});
  ASSERT_OK(saver.Save("one.rckpt", state.ck, On(&fs)));
  Status s = saver.Save("two.rckpt", state.ck, On(&fs));
  EXPECT_THAT(s, StatusIs(StatusCode::kIoError, "one.rckpt"));
  fs.SetFaults({});
  EXPECT_OK(saver.Wait());  // a started save would have failed at the rename
  EXPECT_EQ(fs.GetFile("two.rckpt"), nullptr);
  EXPECT_EQ(fs.GetFile("one.rckpt"), nullptr);
  // Once reported, saving works again.
  ASSERT_OK(saver.Save("two.rckpt", state.ck, On(&fs)));
  ASSERT_OK(saver.Wait());
  EXPECT_EQ(Floats(LoadFrom(&fs, "two.rckpt"), "model.weight"), state.weight);
}

TEST(AsyncSaverTest, DoneCallbackReceivesEachOutcomeOnce) {
  MemFileSystem fs;
  State state;
  AsyncSaver saver;
  std::vector<Status> outcomes;
  auto record = [&](const Status& s) { outcomes.push_back(s); };
  fs.SetFaults({.fail_sync = true});
  ASSERT_OK(saver.Save("bad.rckpt", state.ck, On(&fs), record));
  EXPECT_OK(saver.Wait());  // told to the callback, not again here
  fs.SetFaults({});
  ASSERT_OK(saver.Save("good.rckpt", state.ck, On(&fs), record));
  EXPECT_OK(saver.Wait());
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_THAT(outcomes[0], StatusIs(StatusCode::kIoError, "bad.rckpt"));
  EXPECT_OK(outcomes[1]);
}

TEST(AsyncSaverTest, DestructorFinishesTheSaveInFlight) {
  MemFileSystem fs;
  State state;
  const std::vector<float> at_call = state.weight;
  {
    AsyncSaver saver;
    ASSERT_OK(saver.Save("ck.rckpt", state.ck, On(&fs)));
    state.Mutate();
  }
  EXPECT_EQ(Floats(LoadFrom(&fs, "ck.rckpt"), "model.weight"), at_call);
}

TEST(AsyncSaverTest, DestructorWritesAnErrorNobodySawToStderr) {
  MemFileSystem fs;
  State state;
  fs.SetFaults({.fail_rename = true});
  ::testing::internal::CaptureStderr();
  {
    AsyncSaver saver;
    ASSERT_OK(saver.Save("lost.rckpt", state.ck, On(&fs)));
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("never waited for"));
  EXPECT_THAT(err, HasSubstr("lost.rckpt"));
}

TEST(AsyncSaverTest, CancelStopsThePersistAndKeepsThePreviousFile) {
  MemFileSystem fs;
  State state;
  ASSERT_OK(Save("ck.rckpt", state.ck, On(&fs)));
  const std::vector<std::byte> old = *fs.GetFile("ck.rckpt");
  AsyncSaver saver;
  SaveOptions o = On(&fs);
  int calls = 0;
  o.progress = [&](uint64_t, uint64_t) {
    if (++calls == 1) saver.Cancel();  // from the saver's thread, as a signal handler would
    return true;
  };
  state.Mutate();
  ASSERT_OK(saver.Save("ck.rckpt", state.ck, o));
  EXPECT_THAT(saver.Wait(), StatusIs(StatusCode::kIoError, "cancelled"));
  EXPECT_EQ(*fs.GetFile("ck.rckpt"), old);
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, fs.ListDir("."));
  EXPECT_THAT(names, ::testing::ElementsAre("ck.rckpt"));  // no temporary left
}

TEST(AsyncSaverTest, UserProgressRunsAndCanCancel) {
  MemFileSystem fs;
  State state;
  AsyncSaver saver;
  SaveOptions o = On(&fs);
  o.progress = [](uint64_t done, uint64_t) { return done == 0; };
  ASSERT_OK(saver.Save("ck.rckpt", state.ck, o));
  EXPECT_THAT(saver.Wait(), StatusIs(StatusCode::kIoError, "cancelled"));
  EXPECT_EQ(fs.GetFile("ck.rckpt"), nullptr);
}

TEST(AsyncSaverTest, EmptyPathIsInvalidArgumentAtTheCall) {
  State state;
  AsyncSaver saver;
  EXPECT_THAT(saver.Save("", state.ck), StatusIs(StatusCode::kInvalidArgument, "path is empty"));
  EXPECT_TRUE(saver.Done());
}

TEST(AsyncSaverTest, BadOptionsAreThePersistsError) {
  MemFileSystem fs;
  State state;
  AsyncSaver saver;
  SaveOptions o = On(&fs);
  o.alignment = 100;
  ASSERT_OK(saver.Save("ck.rckpt", state.ck, o));
  EXPECT_THAT(saver.Wait(), StatusIs(StatusCode::kInvalidArgument, "alignment is 100"));
}

// Device memory of the emulated runtime holding `values`.
struct DeviceTensor {
  DeviceRuntime* rt;
  Device device;
  void* ptr = nullptr;
  uint64_t bytes;

  DeviceTensor(DeviceRuntime* r, Device d, const std::vector<float>& values)
      : rt(r), device(d), bytes(values.size() * sizeof(float)) {
    ptr = *rt->Allocate(device, bytes);
    Write(values);
  }
  ~DeviceTensor() { rt->Free(device, ptr); }

  void Write(const std::vector<float>& values) {
    Stream s = *rt->CreateStream(device);
    EXPECT_OK(rt->CopyToDeviceAsync(device, s, ptr, values.data(), bytes));
    EXPECT_OK(rt->Synchronize(device, s));
    rt->DestroyStream(device, s);
  }
};

TEST(AsyncSaverTest, DeviceTensorsAreCopiedToPinnedMemoryAndKeepTheirOrigin) {
  std::unique_ptr<DeviceRuntime> rt = NewTestRuntime(2);
  MemFileSystem fs;
  std::vector<float> values(100000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  DeviceTensor dev(rt.get(), Device::Cuda(1), values);
  State state;
  ASSERT_OK(state.ck.AddTensor(
      "model", "model.on_device",
      TensorView{dev.ptr, DType::kF32, {static_cast<int64_t>(values.size())}, Device::Cuda(1)}));

  AsyncSaver saver;
  SaveOptions o = On(&fs);
  o.runtime = rt.get();
  for (int i = 0; i < 2; ++i) {  // the second save reuses the pinned buffer and stream
    ASSERT_OK(saver.Save("ck.rckpt", state.ck, o));
    ASSERT_OK(saver.WaitSnapshot());
    dev.Write(std::vector<float>(values.size(), -1.0f));  // allowed once WaitSnapshot returned
    ASSERT_OK(saver.Wait());
    Checkpoint back = LoadFrom(&fs, "ck.rckpt");
    EXPECT_EQ(back.FindTensor("model.on_device")->Origin(), Device::Cuda(1));
    EXPECT_EQ(back.FindTensor("model.on_device")->tensor.device(), Device::Cpu());
    EXPECT_EQ(Floats(back, "model.on_device"), values);
    EXPECT_EQ(saver.stats().snapshot_bytes, state.ck.TensorBytes());
    dev.Write(values);
  }
}

TEST(AsyncSaverTest, FailedDeviceCopyFailsTheSaveAndWritesNothing) {
  std::unique_ptr<DeviceRuntime> rt =
      NewTestRuntime({.device_count = 1, .fail_after_copies = 2});
  MemFileSystem fs;
  std::vector<float> values(1000, 1.0f);
  DeviceTensor dev(rt.get(), Device::Cuda(0), values);  // copy 1
  State state;
  ASSERT_OK(state.ck.AddTensor(
      "model", "model.on_device",
      TensorView{dev.ptr, DType::kF32, {static_cast<int64_t>(values.size())}, Device::Cuda(0)}));
  AsyncSaver saver;
  SaveOptions o = On(&fs);
  o.runtime = rt.get();
  ASSERT_OK(saver.Save("ck.rckpt", state.ck, o));  // copy 2 fails
  EXPECT_THAT(saver.WaitSnapshot(), StatusIs(StatusCode::kDeviceError, "snapshot"));
  EXPECT_THAT(saver.Wait(), StatusIs(StatusCode::kDeviceError, "ck.rckpt"));
  EXPECT_EQ(fs.GetFile("ck.rckpt"), nullptr);
}

TEST(AsyncSaverTest, ShardedBlocksAreSnapshotToo) {
  MemFileSystem fs;
  std::vector<float> top(6, 1.0f), bottom(6, 2.0f);
  Checkpoint ck;
  std::vector<TensorShard> shards = {
      {0, {0, 0}, Tensor::Borrow({top.data(), DType::kF32, {2, 3}, Device::Cpu()}), {}},
      {0, {2, 0}, Tensor::Borrow({bottom.data(), DType::kF32, {2, 3}, Device::Cpu()}), {}}};
  ASSERT_OK(ck.AddShardedTensor("model", "model.w", DType::kF32, {4, 3}, shards));
  AsyncSaver saver;
  ASSERT_OK(saver.Save("ck.rckpt", ck, On(&fs)));
  std::fill(top.begin(), top.end(), 9.0f);
  ASSERT_OK(saver.Wait());
  std::vector<float> expected(6, 1.0f);
  expected.insert(expected.end(), 6, 2.0f);
  EXPECT_EQ(Floats(LoadFrom(&fs, "ck.rckpt"), "model.w"), expected);
}

}  // namespace
}  // namespace rckpt
