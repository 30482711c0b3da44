// The synthetic regression data set, generated from a seed.
#ifndef RCKPT_EXAMPLES_TRAIN_DEMO_DATASET_H_
#define RCKPT_EXAMPLES_TRAIN_DEMO_DATASET_H_

#include <cstdint>
#include <random>
#include <vector>

namespace train_demo {

inline constexpr int kInputDim = 8;

struct Dataset {
  std::vector<float> x;               // n * kInputDim, row-major
  std::vector<float> y;               // n
  std::vector<int64_t> train_indices;
  std::vector<int64_t> valid_indices;
};

// n samples of a smooth non-linear function of 8 inputs plus noise, and a
// random train/validation split of them, all drawn from `engine`.
Dataset MakeDataset(int64_t n_samples, int64_t n_valid, std::mt19937_64& engine);

// Portable draws: the standard distributions are implementation-defined and
// some keep hidden state, which a captured engine state would not include.
double Uniform01(std::mt19937_64& engine);                // [0, 1), 53 bits
uint64_t UniformBelow(std::mt19937_64& engine, uint64_t n);  // [0, n), unbiased

// Fisher-Yates shuffle of `v` driven by `engine`.
void Shuffle(std::vector<int64_t>& v, std::mt19937_64& engine);

}  // namespace train_demo

#endif  // RCKPT_EXAMPLES_TRAIN_DEMO_DATASET_H_
