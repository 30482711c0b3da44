// Regression tests for two pickle shapes that hippynn's experiment_structure.pt
// holds and that the PyTorch importer once refused or could not save:
// operator functions stored as values, class instances referenced more than
// once (graph nodes whose parents and children point at each other), and
// dicts keyed by objects (GraphModule.names_dict). Fixtures written by torch.save
// (tests/data/hippynn/make_hippynn_fixtures.py, write_pickle_shape_fixtures).
#include <string>

#include "rckpt/checkpoint.h"
#include "rckpt/convert.h"
#include "test_util.h"

namespace rckpt {
namespace {

using ::testing::ElementsAre;

const std::string kDir = std::string(RCKPT_TEST_DATA_DIR) + "/hippynn/";

TEST(PickleOperatorValues, ArithmeticOperatorsAreKeptAsInertGlobals) {
  ImportReport report;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportPyTorch(kDir + "operator_values.pt", {}, &report));
  EXPECT_THAT(report.inert_classes,
              ElementsAre("_operator.add", "_operator.mul", "_operator.pow"));
  const Value* fn = ck.Tree().Find("fn");
  ASSERT_NE(fn, nullptr);
  ASSERT_EQ(fn->kind(), ValueKind::kObject);
  EXPECT_EQ(fn->as_string(), "_operator.pow");
  const TensorEntry* w = ck.FindTensor("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->tensor.dtype(), DType::kF64);
  EXPECT_EQ(w->tensor.host_span<double>()[2], 2.0);
}

TEST(PickleOperatorValues, StrictImportRefusesThemByName) {
  ImportOptions opts;
  opts.strict = true;
  EXPECT_THAT(ImportPyTorch(kDir + "operator_values.pt", opts),
              StatusIs(StatusCode::kUnsupported, "_operator.pow"));
}

TEST(PickleOperatorValues, CallingAnOperatorFunctionIsStillRefused) {
  EXPECT_THAT(ImportPyTorch(kDir + "operator_call.pt"),
              StatusIs(StatusCode::kUnsupported, "refusing to call '_operator.pow'"));
}

TEST(PickleOperatorValues, AttrgetterIsStillRefusedAsAGlobal) {
  EXPECT_THAT(ImportPyTorch(kDir + "operator_attrgetter.pt"),
              StatusIs(StatusCode::kUnsupported, "refusing global 'operator.attrgetter'"));
}

TEST(PickleSharedObjects, CyclicObjectGraphImportsWithSharedReferences) {
  ImportReport report;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportPyTorch(kDir + "cyclic_objects.pt", {}, &report));
  EXPECT_THAT(report.inert_classes, ElementsAre("mylib.graph.Node"));
  ASSERT_EQ(ck.tensors().size(), 1u);
  EXPECT_NE(ck.FindTensor("nodes.0.weight"), nullptr);
  // The first occurrence of node a is expanded; "root" and b's parent point
  // back at it by path.
  const Value* root = ck.Tree().Find("root");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(*root, Value::Object("rckpt.ref", Value("nodes.0")));
  const Value& a = ck.Tree().Find("nodes")->items()[0];
  ASSERT_EQ(a.kind(), ValueKind::kObject);
  EXPECT_EQ(a.as_string(), "mylib.graph.Node");
  const Value& b = a.fields().Find("state")->Find("children")->items()[0];
  ASSERT_EQ(b.kind(), ValueKind::kObject);
  EXPECT_EQ(*b.fields().Find("state")->Find("name"), Value("b"));
  EXPECT_EQ(b.fields().Find("state")->Find("parents")->items()[0],
            Value::Object("rckpt.ref", Value("nodes.0")));
  EXPECT_EQ(ck.Tree().Find("nodes")->items()[1],
            Value::Object("rckpt.ref", Value("nodes.0.children.0")));
}

TEST(PickleSharedObjects, ExportWithDropObjectsWritesNoneForThem) {
  std::string dir = testing::NewTempDir("pickle-shapes");
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportPyTorch(kDir + "cyclic_objects.pt"));
  ExportOptions drop;
  drop.drop_objects = true;
  ASSERT_OK(ExportPyTorch(ck, dir + "/out.pt", drop));
  ImportOptions strict;
  strict.strict = true;
  ASSERT_OK_AND_ASSIGN(Checkpoint back, ImportPyTorch(dir + "/out.pt", strict));
  EXPECT_TRUE(back.Tree().Find("root")->is_null());
  const TensorEntry* w = back.FindTensor("nodes.0.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->tensor.host_span<float>()[3], 3.0f);
}

TEST(PickleObjectKeys, DictKeyedByObjectsBecomesAListOfPairs) {
  ImportReport report;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportPyTorch(kDir + "object_keys.pt", {}, &report));
  EXPECT_THAT(report.inert_classes, ElementsAre("mylib.graph.Node"));
  const Value* names = ck.Tree().Find("names");
  ASSERT_NE(names, nullptr);
  ASSERT_EQ(names->kind(), ValueKind::kObject);
  EXPECT_EQ(names->as_string(), "rckpt.dict");
  ASSERT_EQ(names->fields().size(), 2u);
  const Value& first = names->fields().items()[0];
  ASSERT_EQ(first.kind(), ValueKind::kTuple);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first.items()[0].as_string(), "mylib.graph.Node");
  EXPECT_EQ(first.items()[1], Value("k0"));
  // Dicts with scalar keys stay maps.
  const Value* by_int = ck.Tree().Find("by_int");
  ASSERT_NE(by_int, nullptr);
  EXPECT_EQ(*by_int, Value::Map({{Value(1), Value("one")}}));
}

TEST(PickleObjectKeys, ImportedTreeSavesAsRckptAndReadsBackEqual) {
  std::string dir = testing::NewTempDir("pickle-shapes");
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportPyTorch(kDir + "object_keys.pt"));
  ASSERT_OK(WriteAnyCheckpoint(ck, dir + "/keys.rckpt"));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, ReadAnyCheckpoint(dir + "/keys.rckpt"));
  EXPECT_EQ(back.Tree(), ck.Tree());
}

}  // namespace
}  // namespace rckpt
