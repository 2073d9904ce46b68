// Tests of core/dtype: element sizes, DESIGN.md names, nccl-tests names, parsing of both
// spellings, and the errors for unknown names.
#include "core/dtype.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace dts {
namespace {

TEST(DType, SizesNamesAndNcclNames) {
  struct Expected {
    DType dtype;
    size_t size;
    const char* name;
    const char* nccl_name;
    bool floating;
  };
  // Names: DESIGN.md ("dtype: f32 f64 f16 bf16 i8 u8 i32 i64"), u32 and u64 alike; nccl-tests'
  // type column.
  const Expected table[] = {
      {DType::f32, 4, "f32", "float", true},     {DType::f64, 8, "f64", "double", true},
      {DType::f16, 2, "f16", "half", true},      {DType::bf16, 2, "bf16", "bfloat16", true},
      {DType::i8, 1, "i8", "int8", false},       {DType::u8, 1, "u8", "uint8", false},
      {DType::i32, 4, "i32", "int32", false},    {DType::u32, 4, "u32", "uint32", false},
      {DType::i64, 8, "i64", "int64", false},    {DType::u64, 8, "u64", "uint64", false},
  };
  ASSERT_EQ(std::size(table), kAllDTypes.size());
  for (size_t i = 0; i < std::size(table); ++i) {
    const Expected& e = table[i];
    EXPECT_EQ(kAllDTypes[i], e.dtype);
    EXPECT_EQ(size_of(e.dtype), e.size) << e.name;
    EXPECT_EQ(name(e.dtype), e.name);
    EXPECT_EQ(nccl_name(e.dtype), e.nccl_name);
    EXPECT_EQ(is_floating(e.dtype), e.floating) << e.name;
    EXPECT_EQ(is_unsigned(e.dtype), e.name[0] == 'u') << e.name;
  }
  // fp8: nccl-tests' names are dtsuite's; one byte, floating (its arithmetic: core/fp8_test.cpp).
  ASSERT_EQ(kFp8DTypes.size(), 2u);
  EXPECT_EQ(name(DType::f8e4m3), "f8e4m3");
  EXPECT_EQ(name(DType::f8e5m2), "f8e5m2");
  for (DType d : kFp8DTypes) {
    EXPECT_EQ(nccl_name(d), name(d));
    EXPECT_EQ(size_of(d), 1u);
    EXPECT_TRUE(is_floating(d));
    EXPECT_FALSE(is_unsigned(d));
  }
}

TEST(DType, ParsesBothSpellingsAndAliases) {
  for (DType d : kAllDTypes) {
    EXPECT_EQ(parse_dtype(name(d)), d);
    EXPECT_EQ(parse_dtype(nccl_name(d)), d);
  }
  EXPECT_EQ(parse_dtype("float32"), DType::f32);
  EXPECT_EQ(parse_dtype("float64"), DType::f64);
  EXPECT_EQ(parse_dtype("float16"), DType::f16);
  EXPECT_EQ(parse_dtype("int"), DType::i32);  // nccl-tests' -d int
  for (DType d : kFp8DTypes) EXPECT_EQ(parse_dtype(name(d)), d);
  EXPECT_EQ(parse_dtype("float8_e4m3fn"), DType::f8e4m3);  // PyTorch's names
  EXPECT_EQ(parse_dtype("float8_e5m2"), DType::f8e5m2);
}

// Expects `parse` to throw Error{invalid_argument} whose message names the bad text.
template <class F>
void expect_invalid(F parse, const std::string& text) {
  try {
    parse(text);
    ADD_FAILURE() << "no error for '" << text << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("'" + text + "'"), std::string::npos) << e.what();
  }
}

TEST(DType, ParseErrors) {
  const auto parse = [](const std::string& t) { return parse_dtype(t); };
  for (const char* bad : {"", "F32", "fp32", "float ", "int16", "uint16", "bf", "fp8", "f8"}) {
    expect_invalid(parse, bad);
  }
}

TEST(ReduceOp, NamesAndParse) {
  const char* names[] = {"sum", "prod", "min", "max", "avg"};
  ASSERT_EQ(std::size(names), kAllReduceOps.size());
  for (size_t i = 0; i < std::size(names); ++i) {
    EXPECT_EQ(name(kAllReduceOps[i]), names[i]);
    EXPECT_EQ(parse_reduce_op(names[i]), kAllReduceOps[i]);
  }
  const auto parse = [](const std::string& t) { return parse_reduce_op(t); };
  for (const char* bad : {"", "Sum", "mean", "none"}) expect_invalid(parse, bad);
}

TEST(Memory, Names) {
  EXPECT_EQ(name(Memory::host), "host");
  EXPECT_EQ(name(Memory::device), "device");
}

TEST(ParseList, ItemsInOrderAndEveryMalformedListRefused) {
  EXPECT_EQ(parse_list("f32,f16,i32"), (std::vector<std::string>{"f32", "f16", "i32"}));
  EXPECT_EQ(parse_list("one"), (std::vector<std::string>{"one"}));
  // Empty items anywhere (a trailing comma too: getline would drop it) and repeats are refused:
  // a repeat would run and write the same cases twice.
  for (const char* bad : {"", ",", "f32,", ",f32", "f32,,f16", "f32,f32", "a,b,a"}) {
    EXPECT_THROW(parse_list(bad), Error) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace dts
