// DType / ReduceOp names, sizes and parsing.
#include "core/dtype.h"

#include <algorithm>
#include <cctype>
#include <span>
#include <sstream>
#include <string>

#include "core/error.h"

namespace dts {

size_t size_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i8: return 1;
    case DType::u8: return 1;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u32: return 4;
    case DType::u64: return 8;
    case DType::f8e4m3: return 1;
    case DType::f8e5m2: return 1;
  }
  return 0;
}

DType carrier_dtype(DType dtype) { return dtype == DType::f8e4m3 || dtype == DType::f8e5m2 ? DType::u8 : dtype; }

bool is_floating(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 || dtype == DType::bf16 ||
         dtype == DType::f8e4m3 || dtype == DType::f8e5m2;
}

bool is_unsigned(DType dtype) { return dtype == DType::u8 || dtype == DType::u32 || dtype == DType::u64; }

std::string_view name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u32: return "u32";
    case DType::u64: return "u64";
    case DType::f8e4m3: return "f8e4m3";
    case DType::f8e5m2: return "f8e5m2";
  }
  return "?";
}

std::string_view nccl_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::f16: return "half";
    case DType::bf16: return "bfloat16";
    case DType::i8: return "int8";
    case DType::u8: return "uint8";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u32: return "uint32";
    case DType::u64: return "uint64";
    case DType::f8e4m3: return "f8e4m3";  // nccl-tests' spelling is dtsuite's
    case DType::f8e5m2: return "f8e5m2";
  }
  return "?";
}

std::string_view name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::prod: return "prod";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::avg: return "avg";
  }
  return "?";
}

std::string_view name(Memory memory) { return memory == Memory::host ? "host" : "device"; }

int64_t parse_size(const std::string& text) {
  if (text.empty()) throw Error(Error::Kind::invalid_argument, "empty size");
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) throw Error(Error::Kind::invalid_argument, "bad size " + quoted_input(text) + " (expected e.g. 8, 64K, 16M, 1G)");
  const std::string suffix = text.substr(digits);
  int shift = 0;
  if (suffix.empty() || suffix == "B") shift = 0;
  else if (suffix == "K" || suffix == "k" || suffix == "KB" || suffix == "KiB") shift = 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MB" || suffix == "MiB") shift = 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GB" || suffix == "GiB") shift = 30;
  else throw Error(Error::Kind::invalid_argument, "bad size " + quoted_input(text) + " (expected e.g. 8, 64K, 16M, 1G)");
  const std::string number = text.substr(0, digits);
  if (number.size() > 12) throw Error(Error::Kind::invalid_argument, "size " + quoted_input(text) + " is too large");
  const int64_t value = std::stoll(number);
  if (value > (int64_t{1} << (50 - shift))) throw Error(Error::Kind::invalid_argument, "size " + quoted_input(text) + " is too large");
  return value << shift;
}

std::vector<std::string> parse_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) throw Error(Error::Kind::invalid_argument, "empty item in list " + quoted_input(text));
    // A repeated item would run (and write) the same cases twice, which compare then cannot join.
    if (std::find(items.begin(), items.end(), item) != items.end()) {
      throw Error(Error::Kind::invalid_argument, quoted_input(item) + " twice in list " + quoted_input(text));
    }
    items.push_back(item);
  }
  // getline drops a trailing empty item: "f32," would pass as "f32".
  if (!text.empty() && text.back() == ',') {
    throw Error(Error::Kind::invalid_argument, "empty item in list " + quoted_input(text));
  }
  if (items.empty()) throw Error(Error::Kind::invalid_argument, "empty list");
  return items;
}

DType parse_dtype(std::string_view text) {
  for (const auto& list : {std::span<const DType>(kAllDTypes), std::span<const DType>(kFp8DTypes)}) {
    for (DType d : list) {
      if (text == name(d) || text == nccl_name(d)) return d;
    }
  }
  if (text == "float32") return DType::f32;
  if (text == "float64") return DType::f64;
  if (text == "float16") return DType::f16;
  if (text == "int") return DType::i32;
  // PyTorch's names of the OCP formats (e4m3 has no infinity: "fn", finite and NaN).
  if (text == "float8_e4m3fn") return DType::f8e4m3;
  if (text == "float8_e5m2") return DType::f8e5m2;
  throw Error(Error::Kind::invalid_argument, "unknown dtype " + quoted_input(text) +
                                                 " (expected f32, f64, f16, bf16, i8, u8, i32, u32, i64, u64, "
                                                 "f8e4m3, f8e5m2)");
}

ReduceOp parse_reduce_op(std::string_view text) {
  for (ReduceOp op : kAllReduceOps) {
    if (text == name(op)) return op;
  }
  throw Error(Error::Kind::invalid_argument,
              "unknown reduction op " + quoted_input(text) + " (expected sum, prod, min, max, avg)");
}

}  // namespace dts
