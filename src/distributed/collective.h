// What collective saves and loads build on a Communicator: agreeing on an
// outcome, alone or together with the data a step exchanges anyway, so that
// a step costs one collective.
#ifndef RCKPT_SRC_DISTRIBUTED_COLLECTIVE_H_
#define RCKPT_SRC_DISTRIBUTED_COLLECTIVE_H_

#include <string>
#include <string_view>
#include <vector>

#include "rckpt/distributed.h"
#include "rckpt/status.h"

namespace rckpt {

// Every rank passes its own outcome and gets the same answer back: OK when
// every rank succeeded, else the lowest failing rank's error, its message
// prefixed "rank <r>: " unless it starts with such a prefix already. When
// the collective itself fails, that failure (this rank's view) is returned.
// Collective.
Status Agree(Communicator& comm, const Status& local);

// Agree and AllGather in one collective: every rank's `payload`, by rank,
// when every rank's `local` is OK; else the error Agree returns.
Result<std::vector<std::string>> AgreeAndAllGather(Communicator& comm, const Status& local,
                                                   std::string_view payload);

// Gather to `root` with every rank's outcome: on `root`, every rank's
// payload, or the lowest failing rank's error (prefixed as Agree's);
// elsewhere an empty list, or this rank's own error. Only `root` learns the
// others' outcome: a later Agree carries its verdict to them. Collective.
Result<std::vector<std::string>> GatherOutcomes(Communicator& comm, int root, const Status& local,
                                                std::string_view payload);

// `message` prefixed "rank <rank>: " unless it names a rank already.
std::string WithRank(int rank, const std::string& message);

}  // namespace rckpt

#endif  // RCKPT_SRC_DISTRIBUTED_COLLECTIVE_H_
