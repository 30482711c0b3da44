// Writes tests/data/golden/ and tests/data/golden-errors/ (run by hand when a
// format version is released; the files are then committed and frozen):
//   rckpt-make-golden <tests/data directory>
// Golden-error files are named <what>.<code>.rckpt, <code> being the
// lower-case StatusCode name the reader must answer with.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "codec/codec.h"
#include "format/layout.h"
#include "golden/golden_checkpoints.h"
#include "rckpt/io.h"

namespace {

std::vector<char> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void WriteAll(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: rckpt-make-golden TESTS_DATA_DIR\n");
    return 2;
  }
  std::string dir = argv[1];
  for (auto& c : rckpt::golden::GoldenCases()) {
    c.options.writer = "rckpt 0.1.0 (golden)";
    rckpt::Status s = rckpt::Save(dir + "/golden/" + c.file, c.checkpoint, c.options);
    if (!s.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.file.c_str(), s.ToString().c_str());
      return 1;
    }
  }
  const std::string base = dir + "/golden/v1.0-training-state.rckpt";
  const std::vector<char> good = ReadAll(base);
  const std::string out = dir + "/golden-errors/";
  WriteAll(out + "empty.corruption.rckpt", {});
  WriteAll(out + "truncated-footer.corruption.rckpt",
           std::vector<char>(good.begin(), good.end() - 10));
  WriteAll(out + "truncated-half.corruption.rckpt",
           std::vector<char>(good.begin(), good.begin() + good.size() / 2));
  {
    auto b = good;
    b[rckpt::kHeaderSize + 8] ^= 0x40;  // inside the first chunk
    WriteAll(out + "chunk-bitflip.corruption.rckpt", b);
  }
  {
    auto b = good;
    b[b.size() - rckpt::kFooterSize - 20] ^= 0x01;  // inside the manifest
    WriteAll(out + "manifest-bitflip.corruption.rckpt", b);
  }
  {
    auto b = good;
    rckpt::Header h;
    h.version_major = 2;
    auto hb = rckpt::EncodeHeader(h);
    std::memcpy(b.data(), hb.data(), hb.size());
    WriteAll(out + "newer-major-version.unsupported.rckpt", b);
  }
  {
    std::string lfs =
        "version https://git-lfs.github.com/spec/v1\n"
        "oid sha256:0f343b0931126a20f133d67c2b018a3b5d4a2c0b6b5b0b8c3e1e6e3e2b7d5e4f\n"
        "size 73014444\n";
    WriteAll(out + "git-lfs-pointer.corruption.rckpt", std::vector<char>(lfs.begin(), lfs.end()));
  }
  return 0;
}
