// Peer loaders (PyTorch, safetensors) measured by the Python scripts in
// bench/peers/, run as subprocesses on the same tensors.
#ifndef RCKPT_BENCH_BENCH_PEERS_H_
#define RCKPT_BENCH_BENCH_PEERS_H_

#include <map>
#include <string>
#include <vector>

namespace rckpt::bench {

struct PeerResult {
  double seconds = 0;   // median; 0 when skipped
  double bytes = 0;
  std::string skipped;  // reason, when it did not run
};

// Runs `python script args...`; the script prints one flat JSON object per
// line: {"name": ..., "seconds": ..., "bytes": ...} or {"name": ...,
// "skipped": "reason"}. When the script itself fails, every name in
// `expected` is reported skipped with the reason.
std::map<std::string, PeerResult> RunPeerScript(const std::string& python,
                                                const std::string& script,
                                                const std::vector<std::string>& args,
                                                const std::vector<std::string>& expected);

}  // namespace rckpt::bench

#endif  // RCKPT_BENCH_BENCH_PEERS_H_
