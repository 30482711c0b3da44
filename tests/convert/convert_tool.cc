// Test driver for the Python round-trip checks (tests/convert/*.py):
//   convert_tool convert IN OUT [--drop-objects] [--strict]
//   convert_tool dump IN        (one line per tensor / RNG record, then the tree)
// Exit codes: 0 ok, 1 error (message on stderr).
#include <cstdio>
#include <cstring>
#include <string>

#include "rckpt/convert.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: convert_tool convert IN OUT [--drop-objects] [--strict] | dump IN\n");
    return 2;
  }
  std::string cmd = argv[1];
  rckpt::ImportOptions io;
  rckpt::ExportOptions eo;
  for (int i = 3; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--drop-objects")) eo.drop_objects = true;
    if (!std::strcmp(argv[i], "--strict")) io.strict = true;
  }
  rckpt::ImportReport report;
  auto ck = rckpt::ReadAnyCheckpoint(argv[2], io, &report);
  if (!ck.ok()) {
    std::fprintf(stderr, "%s\n", ck.status().ToString().c_str());
    return 1;
  }
  for (const std::string& w : report.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  if (cmd == "dump") {
    for (const auto& t : ck->tensors()) {
      std::printf("tensor %s section=%s role=%s dtype=%s shape=%s origin=%s\n", t.name.c_str(),
                  t.section.c_str(), std::string(rckpt::RoleName(t.role)).c_str(),
                  std::string(rckpt::DTypeName(t.tensor.dtype())).c_str(),
                  rckpt::ShapeToString(t.tensor.shape()).c_str(), t.Origin().ToString().c_str());
    }
    for (const auto& r : ck->rng()) {
      std::printf("rng %s kind=%s origin=%s bytes=%zu\n", r.name.c_str(),
                  std::string(rckpt::RngKindName(r.kind)).c_str(), r.origin.ToString().c_str(),
                  r.bytes.size());
    }
    for (const auto& c : report.inert_classes) std::printf("inert %s\n", c.c_str());
    std::printf("tree %s\n", ck->Tree().DebugString(100000).c_str());
    return 0;
  }
  if (cmd == "convert" && argc >= 4) {
    rckpt::Status s = rckpt::WriteAnyCheckpoint(*ck, argv[3], eo);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    return 0;
  }
  std::fprintf(stderr, "unknown command %s\n", cmd.c_str());
  return 2;
}
