// The child process of the reliability tests: saves, loads and imports that
// a test kills, limits or measures from outside. One line on stdout per run.
//
//   reliability_child save PATH SEED MIB KILL_AT   SIGKILLs itself once the
//                                                  save's progress reaches
//                                                  KILL_AT bytes (-1: never)
//   reliability_child save-fsize PATH SEED MIB LIMIT  saves under
//                                                  RLIMIT_FSIZE = LIMIT bytes
//   reliability_child digest PATH                  loads, prints the digest
//   reliability_child import KIND PATH             KIND: rckpt | pytorch |
//                                                  safetensors; prints the
//                                                  code and peak RSS (KiB)
#include <signal.h>
#include <sys/resource.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "reliability/reliability_util.h"
#include "rckpt/convert.h"
#include "rckpt/io.h"

namespace rckpt::reliability {
namespace {

int Usage() {
  std::fprintf(stderr, "usage: reliability_child save|save-fsize|digest|import ...\n");
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
  if (mode == "save-fsize" && argc == 6) {
    return SaveUnderFileSizeLimit(argv[2], std::strtoull(argv[3], nullptr, 10),
                                  std::strtoull(argv[4], nullptr, 10),
                                  std::strtoull(argv[5], nullptr, 10));
  }
  if (mode == "digest" && argc == 3) return PrintDigest(argv[2]);
  if (mode == "import" && argc == 4) return Import(argv[2], argv[3]);
  return Usage();
}
