// Saves and loads a checkpoint through the installed headers and library.
#include <cstdio>
#include <vector>

#include "rckpt/io.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::vector<float> w = {1.5f, -2.0f, 3.25f};
  rckpt::Checkpoint ck;
  rckpt::Status s = ck.AddTensor("model", "w", rckpt::TensorView{w.data(), rckpt::DType::kF32, {3}, {}});
  if (s.ok()) s = rckpt::Save(argv[1], ck);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  auto back = rckpt::Load(argv[1]);
  if (!back.ok()) {
    std::fprintf(stderr, "%s\n", back.status().ToString().c_str());
    return 1;
  }
  auto got = back->FindTensor("w")->tensor.host_span<float>();
  if (got.size() != 3 || got[2] != 3.25f) return 1;
  std::printf("consumer: saved and loaded %zu floats\n", got.size());
  return 0;
}
