// SPDX-License-Identifier: MIT
//
// Data types have three spellings: the Python name, the short form inside
// printed tensor names (T0_g___bfloat), and their size for allocation.

#include <sstream>

#include <gtest/gtest.h>

#include "ir/dtype.h"

namespace mdfuser {
namespace {

TEST(DataType, PythonNames) {
  EXPECT_EQ(dtypeName(DataType::BFloat16), "BFloat16");
  EXPECT_EQ(dtypeName(DataType::Half), "Half");
  EXPECT_EQ(dtypeName(DataType::Float), "Float");
  EXPECT_EQ(dtypeName(DataType::Int32), "Int32");
  std::ostringstream ss;
  ss << DataType::Double;
  EXPECT_EQ(ss.str(), "Double");
}

TEST(DataType, ShortFormsInPrintedTensors) {
  EXPECT_EQ(typeString(DataType::BFloat16), "__bfloat");
  EXPECT_EQ(typeString(DataType::Half), "__half");
  EXPECT_EQ(typeString(DataType::Float), "float");
  EXPECT_EQ(typeString(DataType::Int), "int64_t");
  EXPECT_EQ(typeString(DataType::Int32), "int");
  EXPECT_EQ(typeString(DataType::Bool), "bool");
}

TEST(DataType, SizeInBytes) {
  EXPECT_EQ(sizeInBytes(DataType::Double), 8);
  EXPECT_EQ(sizeInBytes(DataType::Int), 8);
  EXPECT_EQ(sizeInBytes(DataType::Float), 4);
  EXPECT_EQ(sizeInBytes(DataType::Int32), 4);
  EXPECT_EQ(sizeInBytes(DataType::BFloat16), 2);
  EXPECT_EQ(sizeInBytes(DataType::Half), 2);
  EXPECT_EQ(sizeInBytes(DataType::Bool), 1);
}

} // namespace
} // namespace mdfuser
