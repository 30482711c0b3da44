// The child process of the reliability tests: saves, loads and imports that
// a test kills, limits or measures from outside. One line on stdout per run.
//
//   reliability_child save PATH SEED MIB KILL_AT   SIGKILLs itself once the
//                                                  save's progress reaches
//                                                  KILL_AT bytes (-1: never)
//   reliability_child save-steps PATH SEED MIB     saves one step at a time:
//                                                  before every file-system
//                                                  call and progress report,
//                                                  and once after the save
//                                                  returns, prints
//                                                  "STEP <i> <what>" and waits
//                                                  for a byte on stdin
//   reliability_child save-fsize PATH SEED MIB LIMIT  saves under
//                                                  RLIMIT_FSIZE = LIMIT bytes
//   reliability_child digest PATH                  loads, prints the digest
//   reliability_child import KIND PATH             KIND: rckpt | pytorch |
//                                                  safetensors; prints the
//                                                  code and peak RSS (KiB)
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "reliability/reliability_util.h"
#include "rckpt/convert.h"
#include "rckpt/file.h"
#include "rckpt/io.h"

namespace rckpt::reliability {
namespace {

int Usage() {
  std::fprintf(stderr, "usage: reliability_child save|save-steps|save-fsize|digest|import ...\n");
  return 2;
}

void PrintStatus(const Status& s) {
  std::printf("%s\t%s\n", std::string(StatusCodeName(s.code())).c_str(), s.message().c_str());
}

int Save(const std::string& path, uint64_t seed, uint64_t mib, int64_t kill_at) {
  const Checkpoint ck = MakeCheckpoint(seed, mib);
  SaveOptions o;
  o.codec = Codec::kNone;
  o.chunk_bytes = 256 << 10;
  o.threads = 2;
  o.progress = [kill_at](uint64_t done, uint64_t) {
    if (kill_at >= 0 && done >= static_cast<uint64_t>(kill_at)) raise(SIGKILL);
    return true;
  };
  const Status s = rckpt::Save(path, ck, o);
  PrintStatus(s);
  return s.ok() ? 0 : 1;
}

// The stepping protocol of save-steps: announce the step on stdout, wait for
// the parent's byte on stdin. The parent kills the process at the step it
// chose, so everything before that step has happened and nothing after it.
class Stepper {
 public:
  void Step(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string line = "STEP " + std::to_string(next_++) + " " + what + "\n";
    if (write(STDOUT_FILENO, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      std::abort();
    }
    char go;
    if (read(STDIN_FILENO, &go, 1) != 1) std::abort();  // the parent went away
  }

 private:
  std::mutex mu_;
  int next_ = 0;
};

class SteppedFile : public WritableFile {
 public:
  SteppedFile(std::unique_ptr<WritableFile> file, Stepper& stepper, std::string name)
      : file_(std::move(file)), stepper_(stepper), name_(std::move(name)) {}
  Status Append(std::span<const std::byte> data) override {
    stepper_.Step("append " + name_ + " " + std::to_string(data.size()));
    return file_->Append(data);
  }
  Status Sync() override {
    stepper_.Step("sync " + name_);
    return file_->Sync();
  }
  Status Close() override {
    stepper_.Step("close " + name_);
    return file_->Close();
  }

 private:
  std::unique_ptr<WritableFile> file_;
  Stepper& stepper_;
  std::string name_;
};

// The POSIX file system, one step before every call that changes files.
class SteppedFileSystem : public FileSystem {
 public:
  explicit SteppedFileSystem(Stepper& stepper) : stepper_(stepper) {}
  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override {
    return fs_.OpenForRead(path);
  }
  Result<std::unique_ptr<WritableFile>> OpenForWrite(const std::string& path) override {
    stepper_.Step("open " + Name(path));
    RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, fs_.OpenForWrite(path));
    return std::unique_ptr<WritableFile>(
        std::make_unique<SteppedFile>(std::move(file), stepper_, Name(path)));
  }
  Status Rename(const std::string& from, const std::string& to) override {
    stepper_.Step("rename " + Name(from) + " " + Name(to));
    return fs_.Rename(from, to);
  }
  Status Remove(const std::string& path) override {
    stepper_.Step("remove " + Name(path));
    return fs_.Remove(path);
  }
  Status SyncParentDir(const std::string& path) override {
    stepper_.Step("sync-dir " + Name(path));
    return fs_.SyncParentDir(path);
  }
  Result<std::vector<std::string>> ListDir(const std::string& dir) override {
    return fs_.ListDir(dir);
  }
  bool Exists(const std::string& path) override { return fs_.Exists(path); }

 private:
  // The file name; a temporary's pid and random part become '*', so that
  // every run of the same save announces the same steps.
  static std::string Name(const std::string& path) {
    std::string name = path.substr(path.find_last_of('/') + 1);
    const size_t tmp = name.find(".tmp-");
    return tmp == std::string::npos ? name : name.substr(0, tmp) + ".tmp-*";
  }
  FileSystem& fs_ = PosixFileSystem();
  Stepper& stepper_;
};

int SaveInSteps(const std::string& path, uint64_t seed, uint64_t mib) {
  const Checkpoint ck = MakeCheckpoint(seed, mib);
  Stepper stepper;
  SteppedFileSystem fs(stepper);
  SaveOptions o;
  o.codec = Codec::kNone;
  o.chunk_bytes = 256 << 10;
  o.threads = 2;
  o.fs = &fs;
  o.progress = [&stepper](uint64_t done, uint64_t total) {
    stepper.Step("progress " + std::to_string(done) + "/" + std::to_string(total));
    return true;
  };
  const Status s = rckpt::Save(path, ck, o);
  stepper.Step("returned");
  PrintStatus(s);
  return s.ok() ? 0 : 1;
}

int SaveUnderFileSizeLimit(const std::string& path, uint64_t seed, uint64_t mib,
                           uint64_t limit) {
  // Without this the first write past the limit kills the process (SIGXFSZ)
  // instead of failing with EFBIG, which is what a full disk looks like.
  signal(SIGXFSZ, SIG_IGN);
  const Checkpoint ck = MakeCheckpoint(seed, mib);
  rlimit rl{limit, limit};
  if (setrlimit(RLIMIT_FSIZE, &rl) != 0) {
    std::perror("setrlimit");
    return 2;
  }
  SaveOptions o;
  o.codec = Codec::kNone;
  o.chunk_bytes = 256 << 10;
  PrintStatus(rckpt::Save(path, ck, o));
  return 0;
}

int PrintDigest(const std::string& path) {
  Result<Checkpoint> ck = Load(path);
  if (!ck.ok()) {
    PrintStatus(ck.status());
    return 1;
  }
  std::printf("%016" PRIx64 "\n", Digest(*ck));
  return 0;
}

int Import(std::string_view kind, const std::string& path) {
  Status s;
  if (kind == "rckpt") {
    s = Load(path).status();
  } else if (kind == "pytorch") {
    s = ImportPyTorch(path).status();
  } else if (kind == "safetensors") {
    s = ImportSafetensors(path).status();
  } else {
    return Usage();
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("%s %ld\t%s\n", std::string(StatusCodeName(s.code())).c_str(), ru.ru_maxrss,
              s.message().c_str());
  return 0;
}

}  // namespace
}  // namespace rckpt::reliability

int main(int argc, char** argv) {
  using namespace rckpt::reliability;
  if (argc < 3) return Usage();
  const std::string_view mode = argv[1];
  if (mode == "save" && argc == 6) {
    return Save(argv[2], std::strtoull(argv[3], nullptr, 10), std::strtoull(argv[4], nullptr, 10),
                std::strtoll(argv[5], nullptr, 10));
  }
  if (mode == "save-steps" && argc == 5) {
    return SaveInSteps(argv[2], std::strtoull(argv[3], nullptr, 10),
                       std::strtoull(argv[4], nullptr, 10));
  }
  if (mode == "save-fsize" && argc == 6) {
    return SaveUnderFileSizeLimit(argv[2], std::strtoull(argv[3], nullptr, 10),
                                  std::strtoull(argv[4], nullptr, 10),
                                  std::strtoull(argv[5], nullptr, 10));
  }
  if (mode == "digest" && argc == 3) return PrintDigest(argv[2]);
  if (mode == "import" && argc == 4) return Import(argv[2], argv[3]);
  return Usage();
}
