#include "dataset.h"

#include <cmath>
#include <numeric>
#include <utility>

namespace train_demo {

double Uniform01(std::mt19937_64& engine) {
  return static_cast<double>(engine() >> 11) * 0x1.0p-53;
}

uint64_t UniformBelow(std::mt19937_64& engine, uint64_t n) {
  // Rejects the top partial range so every value is equally likely.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t r;
  do {
    r = engine();
  } while (r >= limit);
  return r % n;
}

void Shuffle(std::vector<int64_t>& v, std::mt19937_64& engine) {
  for (size_t i = v.size(); i > 1; --i) {
    size_t j = static_cast<size_t>(UniformBelow(engine, i));
    std::swap(v[i - 1], v[j]);
  }
}

Dataset MakeDataset(int64_t n_samples, int64_t n_valid, std::mt19937_64& engine) {
  Dataset d;
  d.x.resize(static_cast<size_t>(n_samples * kInputDim));
  d.y.resize(static_cast<size_t>(n_samples));
  for (int64_t i = 0; i < n_samples; ++i) {
    float* x = &d.x[static_cast<size_t>(i * kInputDim)];
    for (int j = 0; j < kInputDim; ++j) {
      x[j] = static_cast<float>(4.0 * Uniform01(engine) - 2.0);
    }
    // Approximately normal noise: a centred sum of four uniforms.
    double noise = 0;
    for (int k = 0; k < 4; ++k) noise += Uniform01(engine);
    noise = (noise - 2.0) * 0.05;
    double y = std::sin(x[0]) + 0.5 * x[1] * x[2] - 0.3 * x[3] * x[3] +
               std::tanh(x[4] - x[5]) + 0.1 * x[6] * x[7] + noise;
    d.y[static_cast<size_t>(i)] = static_cast<float>(y);
  }
  std::vector<int64_t> all(static_cast<size_t>(n_samples));
  std::iota(all.begin(), all.end(), 0);
  Shuffle(all, engine);
  d.valid_indices.assign(all.begin(), all.begin() + n_valid);
  d.train_indices.assign(all.begin() + n_valid, all.end());
  return d;
}

}  // namespace train_demo
