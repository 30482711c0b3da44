// The network both examples use. The Python class it mirrors (docs/CPP.md)
// registers the same layers in the same order, so the two have the same
// state_dict keys ("fc1.weight", "bn.weight", ..., "bn.num_batches_tracked"):
//
//   class Net(torch.nn.Module):
//       def __init__(self):
//           super().__init__()
//           self.fc1 = torch.nn.Linear(8, 32, bias=False)  # the batch norm re-centres
//           self.bn = torch.nn.BatchNorm1d(32)
//           self.fc2 = torch.nn.Linear(32, 4)
//
//       def forward(self, x):
//           x = torch.relu(self.bn(self.fc1(x)))
//           return self.fc2(torch.nn.functional.dropout(x, 0.1, self.training))
#ifndef RCKPT_EXAMPLES_LIBTORCH_NET_H_
#define RCKPT_EXAMPLES_LIBTORCH_NET_H_

#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl()
      : fc1(register_module("fc1",
                            torch::nn::Linear(torch::nn::LinearOptions(8, 32).bias(false)))),
        bn(register_module("bn", torch::nn::BatchNorm1d(32))),
        fc2(register_module("fc2", torch::nn::Linear(32, 4))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(bn(fc1(x)));
    return fc2(torch::dropout(x, 0.1, is_training()));
  }

  torch::nn::Linear fc1;
  torch::nn::BatchNorm1d bn;
  torch::nn::Linear fc2;
};
TORCH_MODULE(Net);

#endif  // RCKPT_EXAMPLES_LIBTORCH_NET_H_
