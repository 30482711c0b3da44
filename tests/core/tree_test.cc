#include "rckpt/tree.h"

#include "test_util.h"

namespace rckpt {
namespace {

// Tensor names are key paths of these components, identical wherever a
// front end names a tensor (the importers, Python's rckpt, rckpt::libtorch).
TEST(TreeTest, KeyComponentNamesEveryKindOfKey) {
  EXPECT_EQ(KeyComponent(Value("exp_avg")), "exp_avg");
  EXPECT_EQ(KeyComponent(Value(int64_t{-3})), "-3");
  EXPECT_EQ(KeyComponent(Value(true)), "True");
  EXPECT_EQ(KeyComponent(Value(false)), "False");
  EXPECT_EQ(KeyComponent(Value()), "None");
  EXPECT_EQ(KeyComponent(Value::Tuple({Value(int64_t{1}), Value("a")})), "(1, 'a')");
  EXPECT_EQ(KeyComponent(Value(0.5)), Value(0.5).DebugString(128));
}

}  // namespace
}  // namespace rckpt
