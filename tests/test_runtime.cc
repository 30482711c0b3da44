#include "test_runtime.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <stdexcept>
#include <string>

#include "cuda_standin/standin_control.h"
#include "rckpt/runtime.h"

namespace rckpt {
namespace {

bool g_standin = false;
bool g_require_gpu = false;
std::atomic<int> g_live_standin_runtimes{0};

// The stand-in's controls, through the handle the CUDA runtime loads it by.
struct Controls {
  void (*configure)(const RckptStandinConfig*);
  RckptStandinStats (*stats)();
  int (*violations)(char*, int);
  int (*context_depth)();
  int (*current_device)();
  void (*set_current_device)(int);
  int (*device_of)(const void*);
  void* (*hold_stream)(void*, int);
  void (*release)(void*);
  void (*reset_device)(int);
  void* (*hold_device)(int);
  void (*fail_waits)(int);
  void (*lift_faults)();
};

Controls LoadControls(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) throw std::runtime_error(std::string("cannot load the stand-in: ") + dlerror());
  Controls c;
  c.configure = reinterpret_cast<decltype(c.configure)>(dlsym(h, "rckpt_standin_configure"));
  c.stats = reinterpret_cast<decltype(c.stats)>(dlsym(h, "rckpt_standin_stats"));
  c.violations = reinterpret_cast<decltype(c.violations)>(dlsym(h, "rckpt_standin_violations"));
  c.context_depth = reinterpret_cast<decltype(c.context_depth)>(dlsym(h, "rckpt_standin_context_depth"));
  c.current_device =
      reinterpret_cast<decltype(c.current_device)>(dlsym(h, "rckpt_standin_current_device"));
  c.set_current_device =
      reinterpret_cast<decltype(c.set_current_device)>(dlsym(h, "rckpt_standin_set_current_device"));
  c.device_of = reinterpret_cast<decltype(c.device_of)>(dlsym(h, "rckpt_standin_device_of"));
  c.hold_stream = reinterpret_cast<decltype(c.hold_stream)>(dlsym(h, "rckpt_standin_hold_stream"));
  c.release = reinterpret_cast<decltype(c.release)>(dlsym(h, "rckpt_standin_release"));
  c.reset_device = reinterpret_cast<decltype(c.reset_device)>(dlsym(h, "rckpt_standin_reset_device"));
  c.hold_device = reinterpret_cast<decltype(c.hold_device)>(dlsym(h, "rckpt_standin_hold_device"));
  c.fail_waits = reinterpret_cast<decltype(c.fail_waits)>(dlsym(h, "rckpt_standin_fail_waits"));
  c.lift_faults = reinterpret_cast<decltype(c.lift_faults)>(dlsym(h, "rckpt_standin_lift_faults"));
  return c;
}

// The stand-in every test shares; a second runtime live at the same time
// (a test comparing two machines) gets a copy of the library, which the
// loader loads as a separate instance with its own devices.
const Controls& StandinControls() {
  static const Controls c = LoadControls(RCKPT_CUDA_STANDIN_PATH);
  return c;
}

std::string StandinCopy() {
  static int copies = 0;
  const std::string path = ::testing::TempDir() + "libcuda_standin_" + std::to_string(getpid()) +
                           "_" + std::to_string(++copies) + ".so";
  std::error_code ec;
  std::filesystem::copy_file(RCKPT_CUDA_STANDIN_PATH, path,
                             std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) throw std::runtime_error("cannot copy the stand-in to " + path + ": " + ec.message());
  return path;
}

// rckpt's CUDA runtime over the stand-in, with EmulatedRuntime's hooks.
class StandinRuntime final : public EmulatedRuntime {
 public:
  StandinRuntime(std::unique_ptr<DeviceRuntime> cuda, int devices, Controls controls, bool shared)
      : cuda_(std::move(cuda)), devices_(devices), controls_(controls), shared_(shared) {
    if (shared_) ++g_live_standin_runtimes;
  }
  ~StandinRuntime() override {
    cuda_.reset();
    if (shared_) --g_live_standin_runtimes;
  }

  std::string_view name() const override { return cuda_->name(); }
  Result<int> DeviceCount() override { return cuda_->DeviceCount(); }
  std::string NoDeviceReason() override { return cuda_->NoDeviceReason(); }
  Result<int> CurrentDevice() override { return cuda_->CurrentDevice(); }
  Result<void*> Allocate(Device d, uint64_t n) override { return cuda_->Allocate(d, n); }
  void Free(Device d, void* p) override { cuda_->Free(d, p); }
  Result<void*> AllocatePinned(Device d, uint64_t n) override { return cuda_->AllocatePinned(d, n); }
  void FreePinned(void* p) override { cuda_->FreePinned(p); }
  Result<Stream> CreateStream(Device d) override { return cuda_->CreateStream(d); }
  void DestroyStream(Device d, Stream s) override { cuda_->DestroyStream(d, s); }
  Status CopyToDeviceAsync(Device d, Stream s, void* dst, const void* src, uint64_t n) override {
    return cuda_->CopyToDeviceAsync(d, s, dst, src, n);
  }
  Status CopyToHostAsync(Device d, Stream s, void* dst, const void* src, uint64_t n) override {
    return cuda_->CopyToHostAsync(d, s, dst, src, n);
  }
  bool CanUnshuffle(Device d, std::string* why_not) override { return cuda_->CanUnshuffle(d, why_not); }
  Status UnshuffleAsync(Device d, Stream s, void* dst, const void* src, uint64_t n,
                        uint32_t elem) override {
    return cuda_->UnshuffleAsync(d, s, dst, src, n, elem);
  }
  Result<Event> RecordEvent(Device d, Stream s) override { return cuda_->RecordEvent(d, s); }
  Status StreamWaitEvent(Device d, Stream s, Event e) override { return cuda_->StreamWaitEvent(d, s, e); }
  Status WaitEvent(Event e) override { return cuda_->WaitEvent(e); }
  void DestroyEvent(Event e) override { cuda_->DestroyEvent(e); }
  Status Synchronize(Device d, Stream s) override { return cuda_->Synchronize(d, s); }
  bool DeviceSettled(Device d) override { return cuda_->DeviceSettled(d); }
  DevicePool* pool() override { return cuda_->pool(); }
  DevicePoolStats PoolStats() override { return cuda_->PoolStats(); }
  void ReleasePool() override { cuda_->ReleasePool(); }

  int device_count() const override { return devices_; }
  int LiveAllocations(int d) const override { return Stats().live_allocations[d]; }
  uint64_t LiveBytes(int d) const override { return Stats().live_bytes[d]; }
  int LivePinned() const override { return Stats().live_pinned; }
  int LiveStreams() const override { return Stats().live_streams; }
  int LiveEvents() const override { return Stats().live_events; }
  int BadFrees() const override { return Stats().bad_frees; }
  std::optional<int> DeviceOf(const void* p) const override {
    const int d = controls_.device_of(p);
    return d < 0 ? std::nullopt : std::optional<int>(d);
  }
  uint64_t CopiesExecuted() const override { return Stats().copies; }
  uint64_t UnshufflesExecuted() const override { return Stats().launches; }
  void SetCurrentDevice(int d) override { controls_.set_current_device(d); }
  std::shared_ptr<void> HoldStream(Device d, Stream s) override {
    void* gate = controls_.hold_stream(s.handle, d.index);
    auto release = controls_.release;
    return std::shared_ptr<void>(gate, [release](void* g) {
      if (g != nullptr) release(g);
    });
  }

 private:
  RckptStandinStats Stats() const { return controls_.stats(); }
  std::unique_ptr<DeviceRuntime> cuda_;
  const int devices_;
  const Controls controls_;
  const bool shared_;  // the shared instance, not a copy
};

}  // namespace

bool UsingCudaStandin() { return g_standin; }
void SetUsingCudaStandin(bool on) { g_standin = on; }
bool RequireGpu() { return g_require_gpu; }
void SetRequireGpu(bool on) { g_require_gpu = on; }

std::string CudaStandinPath() { return RCKPT_CUDA_STANDIN_PATH; }

void StandinEnvironment(int devices) {
  if (!g_standin) return;
  setenv("RCKPT_STANDIN_DEVICES", std::to_string(devices).c_str(), 1);
  setenv("RCKPT_TEST_CUDA_DRIVER", RCKPT_CUDA_STANDIN_PATH, 1);
}

std::vector<std::string> StandinArgs(std::vector<std::string> args) {
  if (!g_standin) return args;
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] != "--emulate-devices") continue;
    StandinEnvironment(std::atoi(args[i + 1].c_str()));
    args[i] = "--cuda-driver";
    args[i + 1] = RCKPT_CUDA_STANDIN_PATH;
  }
  return args;
}

std::string StandinCommand(const std::string& command) {
  if (!g_standin) return command;
  static const std::regex kEmulate(R"(--emulate-devices[ =]([0-9]+))");
  std::smatch m;
  std::string out = command;
  while (std::regex_search(out, m, kEmulate)) {
    StandinEnvironment(std::atoi(m[1].str().c_str()));
    out = m.prefix().str() + "--cuda-driver " + RCKPT_CUDA_STANDIN_PATH + m.suffix().str();
  }
  return out;
}

std::unique_ptr<EmulatedRuntime> NewTestRuntime(const EmulatedRuntimeOptions& options) {
  if (!g_standin) return NewEmulatedRuntimeForTesting(options);
  const bool shared = g_live_standin_runtimes == 0;
  const std::string path = shared ? std::string(RCKPT_CUDA_STANDIN_PATH) : StandinCopy();
  const Controls c = shared ? StandinControls() : LoadControls(path);
  RckptStandinConfig config;
  config.devices = options.device_count;
  config.memory_bytes = options.device_memory_bytes;
  config.fail_copy = options.fail_after_copies;
  config.kernel_load_error = options.device_unshuffle ? 0 : 209;  // CUDA_ERROR_NO_BINARY_FOR_GPU
  c.configure(&config);
  Result<std::unique_ptr<DeviceRuntime>> cuda = NewCudaRuntime({.driver_library = path});
  if (!cuda.ok()) throw std::runtime_error(cuda.status().ToString());
  return std::make_unique<StandinRuntime>(std::move(*cuda), options.device_count, c, shared);
}

std::unique_ptr<EmulatedRuntime> NewTestRuntime(int device_count) {
  EmulatedRuntimeOptions o;
  o.device_count = device_count < 0 ? 0 : device_count;
  return NewTestRuntime(o);
}

void ConfigureCudaStandin(const RckptStandinConfig& config) { StandinControls().configure(&config); }
RckptStandinStats CudaStandinStats() { return StandinControls().stats(); }
std::string CudaStandinViolations() {
  char text[8192] = {};
  StandinControls().violations(text, sizeof(text));
  return text;
}
int CudaStandinContextDepth() { return StandinControls().context_depth(); }
int CudaStandinCurrentDevice() { return StandinControls().current_device(); }
void SetCudaStandinCurrentDevice(int device) { StandinControls().set_current_device(device); }
int CudaStandinDeviceOf(const void* p) { return StandinControls().device_of(p); }
void ResetCudaStandinDevice(int device) { StandinControls().reset_device(device); }
void* HoldCudaStandinStream(void* stream, int device) {
  return StandinControls().hold_stream(stream, device);
}
void ReleaseCudaStandinStream(void* gate) { StandinControls().release(gate); }
void* HoldCudaStandinDevice(int device) { return StandinControls().hold_device(device); }
void FailCudaStandinWaits(int error) { StandinControls().fail_waits(error); }
void LiftCudaStandinFaults() { StandinControls().lift_faults(); }

std::string CudaStandinProblems() {
  if (!g_standin) return "";
  const Controls& c = StandinControls();
  std::string out;
  char text[8192] = {};
  if (c.violations(text, sizeof(text)) > 0) out += text;
  if (c.context_depth() != 0) {
    out += "the test's thread was left with " + std::to_string(c.context_depth()) +
           " CUDA context(s) current\n";
  }
  if (g_live_standin_runtimes == 0) {
    const RckptStandinStats s = c.stats();
    int allocations = 0;
    for (int n : s.live_allocations) allocations += n;
    if (allocations + s.live_pinned + s.live_streams + s.live_events + s.live_modules +
            s.retained_contexts >
        0) {
      out += "left live after the test: " + std::to_string(allocations) + " allocations, " +
             std::to_string(s.live_pinned) + " pinned, " + std::to_string(s.live_streams) +
             " streams, " + std::to_string(s.live_events) + " events, " +
             std::to_string(s.live_modules) + " modules, " + std::to_string(s.retained_contexts) +
             " retained contexts\n";
    }
    // Every device's primary context released as often as it was retained.
    for (int d = 0; d < 8; ++d) {
      if (s.live_retains[d] != 0) {
        out += "cuda:" + std::to_string(d) + "'s primary context retained " +
               std::to_string(s.live_retains[d]) + " more time(s) than released\n";
      }
    }
  }
  return out;
}

}  // namespace rckpt
